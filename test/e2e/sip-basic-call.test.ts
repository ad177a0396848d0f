import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runSipp } from './sipp-runner.ts';
import { startTestApp, type TestApp } from './sip-test-app.ts';

describe.each(['udp', 'tcp'] as const)(
  'when a caller places a call over %s and hangs up',
  (transport) => {
    let app: TestApp;
    beforeEach(async () => {
      app = await startTestApp();
    });
    afterEach(async () => {
      await app.stop();
    });

    it('should answer with 200 and SDP, see the ACK, and end the dialog on the caller BYE', async () => {
      const port = transport === 'udp' ? app.udpPort : app.tcpPort;
      const result = await runSipp({
        scenario: 'uac-caller-bye.xml',
        port,
        transport,
        service: '100',
        pauseMs: 200,
      });
      expect(result.exitCode, result.stderr).toBe(0);
      expect(result.successful).toBe(1);
      expect(app.calls).toHaveLength(1);
      expect(app.calls[0]?.calledNumber).toBe('100');
      expect(app.calls[0]?.source.transport).toBe(transport);
      expect(app.events.map((e) => e.event.type)).toEqual(['ack', 'bye', 'ended']);
      expect(app.eventsOf('ended')[0]).toEqual({ type: 'ended', reason: 'remote-bye' });
      const wire = result.firstLines;
      expect(wire).toEqual([
        'sent INVITE sip:100@127.0.0.1:' + port + ' SIP/2.0',
        'received SIP/2.0 100 Trying',
        'received SIP/2.0 200 OK',
        expect.stringMatching(/^sent ACK/),
        expect.stringMatching(/^sent BYE/),
        'received SIP/2.0 200 OK',
      ]);
      expect(result.trace).toMatch(/a=rtpmap:0 PCMU\/8000\r?\n/);
      expect(app.driver.dialogCount()).toBe(0);
    });
  },
);
