/**
 * Delayed offer against sipp over UDP: an INVITE without SDP is answered with callgate's offer in
 * the 200, and the answer the ACK carries settles the media, or, when it is missing or unusable,
 * ends the call with a BYE carrying a Reason header.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { registry } from '../../config/metrics.ts';
import type { InboundCall } from '../../gateway/sip/signaling-driver.ts';
import { runSipp } from './sipp-runner.ts';
import { startTestApp, type TestApp } from './sip-test-app.ts';

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

async function rejected488(): Promise<number> {
  const metric = await registry.getSingleMetric('callgate_sip_calls_rejected_total')?.get();
  return (
    metric?.values.find((value) => value.labels.driver === 'builtin' && value.labels.code === '488')
      ?.value ?? 0
  );
}

/** The 200 callgate sent, as sipp received it. */
const okToInvite = (trace: string): string => {
  const text =
    /UDP message received[^\n]*\n\n(SIP\/2\.0 200 OK[\s\S]*?CSeq: 1 INVITE[\s\S]*?)\n\n-{10}/.exec(
      trace,
    )?.[1] ?? '';
  return `${text.replace(/\r/g, '').trimEnd()}\n`;
};

describe('when the caller sends an INVITE without SDP (delayed offer)', () => {
  it('should offer the tenant codecs in the 200 and settle the media from the answer in the ACK', async () => {
    const accepted: ReturnType<InboundCall['accept']>[] = [];
    app = await startTestApp({
      onCall: (call) => {
        expect(call.offer).toBeUndefined();
        accepted.push(call.accept({ local: { address: '127.0.0.1', port: 30_100 } }));
      },
    });
    const result = await runSipp({
      scenario: 'uac-delayed-offer.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines.map((line) => line.split(' ').slice(0, 3).join(' '))).toEqual([
      'sent INVITE sip:100@127.0.0.1:' + String(app.udpPort),
      'received SIP/2.0 100',
      'received SIP/2.0 200',
      'sent ACK sip:100@127.0.0.1:' + String(app.udpPort),
      'sent BYE sip:100@127.0.0.1:' + String(app.udpPort),
      'received SIP/2.0 200',
    ]);
    const offer = okToInvite(result.trace);
    expect(offer).toMatch(/\nContent-Type: application\/sdp\n/);
    expect(offer).toMatch(/\nc=IN IP4 127\.0\.0\.1\n/);
    expect(offer).toMatch(/\nm=audio 30100 RTP\/AVP 0 8 111 101 110\n/);
    expect(offer).toMatch(/\na=rtpmap:111 opus\/48000\/2\n/);
    expect(offer).toMatch(/\na=rtpmap:101 telephone-event\/8000\n/);
    expect(offer).toMatch(/\na=sendrecv\n/);

    expect(accepted).toMatchObject([
      {
        ok: true,
        answerPending: true,
        media: { codec: 'PCMU', remote: { address: '127.0.0.1', port: 9 } },
      },
    ]);
    const media = /m=audio (\d+) RTP\/AVP 8 101/.exec(result.trace)?.[1];
    expect(app.eventsOf('ack')).toEqual([
      {
        type: 'ack',
        media: {
          codec: 'PCMA',
          payloadType: 8,
          clockRate: 8000,
          channels: 1,
          telephoneEvent: { payloadType: 101, clockRate: 8000 },
          ptime: 20,
          remote: { address: '127.0.0.1', port: Number(media) },
          direction: 'sendrecv',
          held: false,
        },
      },
    ]);
    expect(app.calls[0]?.dialog.media?.codec).toBe('PCMA');
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'remote-bye' }]);
    await app.waitFor(() => app?.driver.dialogCount() === 0);
  });

  it('should do the same over TCP', async () => {
    app = await startTestApp();
    const result = await runSipp({
      scenario: 'uac-delayed-offer.xml',
      port: app.tcpPort,
      transport: 'tcp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(app.eventsOf('ack')).toMatchObject([
      { type: 'ack', media: { codec: 'PCMA', payloadType: 8 } },
    ]);
    expect(app.eventsOf('ended')).toEqual([{ type: 'ended', reason: 'remote-bye' }]);
  });

  it('should offer only the tenant codecs, in its order', async () => {
    app = await startTestApp({
      tenants: [
        {
          id: 'acme',
          numbers: ['100'],
          agent: 'front-desk',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
          codecs: ['PCMA'],
        },
      ],
    });
    const result = await runSipp({
      scenario: 'uac-delayed-offer-bad-answer.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
      extraArgs: ['-key', 'answer_formats', '0'],
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(okToInvite(result.trace)).toMatch(/\nm=audio \d+ RTP\/AVP 8 101\n/);
    // PCMU was never offered, so answering with it is refused like any other codec.
    expect(result.trace).toMatch(/Reason: SIP ;cause=488 ;text="answered 0, offered 8 101"/);
  });

  it.each([
    [
      'a codec callgate did not offer',
      'uac-delayed-offer-bad-answer.xml',
      ['-key', 'answer_formats', '18'],
      /Reason: SIP ;cause=488 ;text="answered 18, offered 0 8 111 101 110"/,
    ],
    [
      'no answer at all',
      'uac-delayed-offer-empty-ack.xml',
      [],
      /Reason: SIP ;cause=488 ;text="the ACK carried no SDP answer"/,
    ],
  ])(
    'should end the call with BYE and a Reason header when the ACK carries %s',
    async (_what, scenario, extraArgs, reason) => {
      app = await startTestApp();
      const before = await rejected488();
      const result = await runSipp({
        scenario,
        port: app.udpPort,
        transport: 'udp',
        service: '100',
        extraArgs,
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
      expect(result.trace).toMatch(reason);
      // The application never hears an ACK for a session that did not come up.
      expect(app.events.map((entry) => entry.event)).toEqual([
        { type: 'ended', reason: 'rejected' },
      ]);
      await app.waitFor(() => app?.driver.dialogCount() === 0 && app.driver.answeredCount() === 0);
      expect(await rejected488()).toBe(before + 1);
    },
  );
});
