/** 100 calls held at the same time, over UDP and over TCP (one sipp connection). */
import { afterEach, describe, expect, it } from 'vitest';
import { runSipp } from './sipp-runner.ts';
import { startTestApp, type TestApp } from './sip-test-app.ts';

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

describe.each(['udp', 'tcp'] as const)(
  'when 100 callers are connected at once over %s',
  (transport) => {
    it('should answer all 100, hold them concurrently, and end every dialog on BYE', async () => {
      app = await startTestApp();
      const port = transport === 'udp' ? app.udpPort : app.tcpPort;
      const result = await runSipp({
        scenario: 'uac-caller-bye.xml',
        port,
        transport,
        service: '100',
        calls: 100,
        rate: 200,
        limit: 100,
        pauseMs: 2_000,
        timeoutSeconds: 30,
        trace: false,
      });
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.successful).toBe(100);
      expect(result.failed).toBe(0);
      expect(app.calls).toHaveLength(100);
      expect(new Set(app.calls.map((call) => call.callId)).size).toBe(100);
      expect(app.maxConcurrent).toBe(100);
      expect(app.eventsOf('ended')).toHaveLength(100);
      expect(app.driver.dialogCount()).toBe(0);
    }, 60_000);
  },
);
