/**
 * The built-in stack over UDP with sipp: calls CANCELled while the application is still setting up
 * their media (it subscribes to the dialog and answers only once its ports are open). The dialog
 * answers the CANCEL 200 and the INVITE 487, the late answer is refused, and a listener that
 * subscribes after the CANCEL is told that the call was cancelled and ended, so it can close what
 * it opened at once (the same rule as the drachtio driver's, drachtio-driver-wire.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AcceptResult, DialogEvent } from '../../../gateway/sip/signaling-driver.ts';
import { runSipp } from '../../e2e/sipp-runner.ts';
import { startTestApp, type TestApp } from '../../e2e/sip-test-app.ts';

const CALLS = 20;
/** The application's media setup: every CANCEL below lands within it, on a loaded machine too. */
const SETUP_MS = 1_500;
const LOCAL = { address: '127.0.0.1', port: 40_000 };

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

describe('when the caller cancels while the application sets the call up', () => {
  it('should send no 200, and a listener subscribing after the CANCEL hears that it ended', async () => {
    const calls: { accepted: AcceptResult | undefined; events: DialogEvent[] }[] = [];
    app = await startTestApp({
      onCall: (call) => {
        const record = {
          accepted: undefined as AcceptResult | undefined,
          events: [] as DialogEvent[],
        };
        calls.push(record);
        call.ring();
        setTimeout(() => {
          call.dialog.on((event) => record.events.push(event));
          record.accepted = call.accept({ local: LOCAL });
        }, SETUP_MS);
      },
    });
    const port = app.udpPort;
    const runs = await Promise.all(
      [
        { scenario: 'uac-cancel-at-once.xml', pauseMs: 0 },
        { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 0 },
        { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 50 },
        { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 150 },
      ].map(({ scenario, pauseMs }) =>
        runSipp({
          scenario,
          port,
          transport: 'udp',
          service: '100',
          calls: CALLS / 4,
          rate: 50,
          pauseMs,
        }),
      ),
    );
    for (const run of runs) {
      expect(run.exitCode, run.firstLines.join('\n')).toBe(0);
      expect(
        run.firstLines.filter((l) => l === 'received SIP/2.0 487 Request Terminated'),
      ).toHaveLength(CALLS / 4);
      // Each 200 sipp received is the CANCEL's.
      const oks = run.trace
        .split(/^-{10,} .*$/m)
        .filter((message) => /received[^\n]*\n\nSIP\/2\.0 200/.test(message));
      expect(oks.map((message) => /^CSeq: (.*)$/m.exec(message)?.[1]?.trim())).toEqual(
        Array.from({ length: CALLS / 4 }, () => '1 CANCEL'),
      );
    }
    const started = Date.now();
    await app.waitFor(
      () => calls.length === CALLS && calls.every((c) => c.events.some((e) => e.type === 'ended')),
      SETUP_MS + 1_000,
    );
    expect(Date.now() - started).toBeLessThan(SETUP_MS + 1_000);
    expect(calls.map((c) => c.accepted?.ok)).toEqual(Array.from({ length: CALLS }, () => false));
    for (const call of calls)
      expect(call.events).toEqual([{ type: 'cancelled' }, { type: 'ended', reason: 'cancelled' }]);
    expect(app.driver.dialogCount()).toBe(0);
  });
});
