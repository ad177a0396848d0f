/** Call flows against sipp over UDP: each test states the behaviour and checks the wire and the events. */
import { afterEach, describe, expect, it } from 'vitest';
import type { TransferOutcome } from '../../gateway/sip/signaling-driver.ts';
import { runSipp } from './sipp-runner.ts';
import { startTestApp, type TestApp } from './sip-test-app.ts';

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

const received = (lines: string[], prefix: string): number =>
  lines.filter((line) => line.startsWith(`received ${prefix}`)).length;

describe('when callgate hangs up an answered call', () => {
  it('should send BYE to the caller after the ACK and end the dialog with local-bye', async () => {
    app = await startTestApp({
      onCall: (call, self) => {
        self.answer(call);
        call.dialog.on((event) => {
          if (event.type === 'ack') void call.dialog.hangup();
        });
      },
    });
    const result = await runSipp({
      scenario: 'uac-callee-bye.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines.map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual([
      'sent INVITE',
      'received SIP/2.0',
      'received SIP/2.0',
      'sent ACK',
      'received BYE',
      'sent SIP/2.0',
    ]);
    expect(result.trace).toMatch(/BYE sip:sipp@127\.0\.0\.1:\d+;transport=UDP SIP\/2\.0/);
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'local-bye' }]);
  });
});

describe('when the caller cancels before the answer', () => {
  it('should answer the CANCEL 200 and the INVITE 487, take the ACK, and report cancelled', async () => {
    app = await startTestApp({ onCall: (call) => call.ring() });
    const result = await runSipp({
      scenario: 'uac-cancel.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines).toContain('received SIP/2.0 487 Request Terminated');
    expect(result.trace).toMatch(/SIP\/2\.0 200 OK[\s\S]*CSeq: 1 CANCEL/);
    expect(app.events.map((e) => e.event.type)).toEqual(['cancelled', 'ended']);
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'cancelled' }]);
    await app.waitFor(() => app?.driver.dialogCount() === 0);
  });
});

describe('when the caller puts the call on hold and resumes it by re-INVITE', () => {
  it('should answer sendonly with recvonly and sendrecv with sendrecv, with increasing o= versions', async () => {
    app = await startTestApp();
    const result = await runSipp({
      scenario: 'uac-reinvite-hold.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const reinvites = app.eventsOf('reinvite');
    expect(
      reinvites.map((e) => (e.type === 'reinvite' ? [e.media.held, e.media.direction] : [])),
    ).toEqual([
      [true, 'recvonly'],
      [false, 'sendrecv'],
    ]);
    const versions = [...result.trace.matchAll(/o=callgate \d+ (\d+) IN IP4/g)].map((m) =>
      Number(m[1]),
    );
    expect(versions).toEqual([1, 2, 3]);
  });
});

describe('when the caller sends DTMF by SIP INFO', () => {
  it('should answer each INFO 200 and report the digits in order', async () => {
    app = await startTestApp();
    const result = await runSipp({
      scenario: 'uac-info-dtmf.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(app.eventsOf('dtmf')).toEqual([
      { type: 'dtmf', digit: '5', durationMs: 160 },
      { type: 'dtmf', digit: '#' },
    ]);
  });
});

describe('when a trunk sends OPTIONS', () => {
  it('should answer 200 with the Allow header and start no call', async () => {
    app = await startTestApp();
    const result = await runSipp({
      scenario: 'uac-options.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.trace).toMatch(/Allow: INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY/);
    expect(app.calls).toHaveLength(0);
  });
});

describe('when a caller dials a number no tenant owns', () => {
  it('should answer 404 and never reach the application', async () => {
    app = await startTestApp();
    const result = await runSipp({
      scenario: 'uac-rejected.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '999',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines).toContain('received SIP/2.0 404 Not Found');
    expect(app.calls).toHaveLength(0);
  });
});

describe('when an INVITE is retransmitted before the answer', () => {
  it('should create one call and answer the copy with the last response', async () => {
    app = await startTestApp({
      // Answered late enough that the copy surely comes while 100 Trying is the last response.
      onCall: (call, self) => {
        setTimeout(() => self.answer(call), 1_000);
      },
    });
    const result = await runSipp({
      scenario: 'uac-retransmitted-invite.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(app.calls).toHaveLength(1);
    expect(received(result.firstLines, 'SIP/2.0 100')).toBe(2);
    expect(app.events.map((e) => e.event.type)).toEqual(['ack', 'bye', 'ended']);
  });
});

describe('when the caller never acknowledges the 200', () => {
  it('should retransmit the 200 with growing intervals and send BYE after 64*T1', async () => {
    app = await startTestApp({ timers: { t1Ms: 50, t2Ms: 400, t4Ms: 250 } });
    const started = Date.now();
    const result = await runSipp({
      scenario: 'uac-lost-ack.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
      timeoutSeconds: 15,
    });
    const elapsed = Date.now() - started;
    expect(result.exitCode, result.stderr).toBe(0);
    expect(received(result.firstLines, 'SIP/2.0 200')).toBeGreaterThanOrEqual(4);
    expect(result.firstLines.at(-2)).toMatch(/^received BYE/);
    // 64*T1 = 3.2 s with T1 = 50 ms.
    expect(elapsed).toBeGreaterThanOrEqual(3_000);
    expect(app.eventsOf('ack')).toHaveLength(0);
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'ack-timeout' }]);
  });
});

describe('when callgate transfers an answered call', () => {
  it('should send REFER, report 202 and NOTIFY progress, then send BYE', async () => {
    let outcome: Promise<TransferOutcome> | undefined;
    app = await startTestApp({
      onCall: (call, self) => {
        self.answer(call);
        call.dialog.on((event) => {
          if (event.type === 'ack') outcome = call.dialog.transfer('sip:agent@example.com');
        });
      },
    });
    const result = await runSipp({
      scenario: 'uac-refer.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(await outcome).toEqual({ type: 'succeeded' });
    expect(result.trace).toMatch(/Refer-To: <sip:agent@example\.com>/);
    expect(app.eventsOf('transfer')).toEqual([
      { type: 'transfer', progress: { state: 'accepted' } },
      { type: 'transfer', progress: { state: 'trying', status: 100 } },
      { type: 'transfer', progress: { state: 'succeeded', status: 200 } },
    ]);
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'transferred' }]);
  });
});
