/**
 * Delayed offer on the drachtio driver, without a drachtio-server: srf is a fake that records
 * what the driver asks it to send (the 200's SDP, the BYE's headers) and replays the ACK as srf
 * would deliver it to the dialog.
 */
import { EventEmitter } from 'node:events';
import type Srf from 'drachtio-srf';
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';
import type { AcceptResult, DialogEvent } from '../../../gateway/sip/signaling-driver.ts';

interface FakeDialog extends EventEmitter {
  destroyed: Array<{ headers: Record<string, string> } | undefined>;
}

function fakeSrf(): { srf: Srf; localSdp: string[]; dialogs: FakeDialog[] } {
  const localSdp: string[] = [];
  const dialogs: FakeDialog[] = [];
  const srf = Object.assign(new EventEmitter(), {
    createUAS: (_req: unknown, _res: unknown, options: { localSdp: string }) => {
      localSdp.push(options.localSdp);
      const dialog = Object.assign(new EventEmitter(), {
        destroyed: [] as FakeDialog['destroyed'],
        destroy(options?: { headers: Record<string, string> }, done?: () => void) {
          dialog.destroyed.push(options);
          done?.();
        },
      });
      dialogs.push(dialog);
      return Promise.resolve(dialog);
    },
  });
  return { srf: srf as unknown as Srf, localSdp, dialogs };
}

const INVITE_WITHOUT_SDP = [
  'INVITE sip:100@127.0.0.1 SIP/2.0',
  'Via: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bKdelayed',
  'Max-Forwards: 70',
  'From: <sip:alice@example.com>;tag=a1',
  'To: <sip:100@127.0.0.1>',
  'Call-ID: delayed-1',
  'CSeq: 1 INVITE',
  'Content-Length: 0',
  '',
  '',
].join('\r\n');

function ack(body: string, contentType = 'application/sdp'): Srf.SrfRequest {
  return {
    body,
    get: (name: string) => (name === 'Content-Type' && body !== '' ? contentType : undefined),
  } as unknown as Srf.SrfRequest;
}

const ANSWER =
  'v=0\r\no=- 1 1 IN IP4 192.0.2.5\r\ns=-\r\nc=IN IP4 192.0.2.5\r\nt=0 0\r\nm=audio 4000 RTP/AVP 8 101\r\na=rtpmap:101 telephone-event/8000\r\n';

async function delayedCall(): Promise<{
  accepted: AcceptResult[];
  events: DialogEvent[];
  localSdp: string[];
  dialog: FakeDialog;
}> {
  const { srf, localSdp, dialogs } = fakeSrf();
  const driver = new DrachtioSignalingDriver({
    sip: sipSchema.parse({ driver: 'drachtio' }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['192.0.2.0/24'] },
        codecs: ['PCMA', 'PCMU'],
      }),
    ],
    logger: new Logger({ level: 'error', sink: { write: () => undefined } }),
    srf,
  });
  const accepted: AcceptResult[] = [];
  const events: DialogEvent[] = [];
  driver.onCall((call) => {
    expect(call.offer).toBeUndefined();
    call.dialog.on((event) => events.push(event));
    accepted.push(call.accept({ local: { address: '198.51.100.7', port: 20_000 } }));
  });
  const req = Object.assign(new EventEmitter(), {
    raw: INVITE_WITHOUT_SDP,
    source_address: '192.0.2.5',
    source_port: 5060,
    protocol: 'udp',
  });
  driver.receiveInvite(
    req as unknown as Srf.SrfRequest,
    { send: () => undefined } as unknown as Srf.SrfResponse,
  );
  await new Promise((resolve) => setImmediate(resolve));
  const dialog = dialogs[0];
  if (dialog === undefined) throw new Error('createUAS was not called');
  return { accepted, events, localSdp, dialog };
}

describe('when drachtio hands over an INVITE without SDP', () => {
  it('should send callgate offer in the 200 and settle the media from the ACK answer', async () => {
    const { accepted, events, localSdp, dialog } = await delayedCall();
    expect(localSdp[0]).toContain('\r\nm=audio 20000 RTP/AVP 8 0 101\r\n');
    expect(accepted).toMatchObject([
      {
        ok: true,
        answerPending: true,
        media: { codec: 'PCMA', remote: { address: '192.0.2.5', port: 9 } },
      },
    ]);
    expect(events).toEqual([]);
    dialog.emit('ack', ack(ANSWER));
    expect(events).toEqual([
      {
        type: 'ack',
        media: {
          codec: 'PCMA',
          payloadType: 8,
          clockRate: 8000,
          channels: 1,
          telephoneEvent: { payloadType: 101, clockRate: 8000 },
          ptime: 20,
          remote: { address: '192.0.2.5', port: 4000 },
          direction: 'sendrecv',
          held: false,
        },
      },
    ]);
    // A later ACK (of a re-INVITE's 200) confirms nothing again.
    dialog.emit('ack', ack(''));
    expect(events).toHaveLength(1);
    expect(dialog.destroyed).toEqual([]);
  });

  it.each([
    ['no answer', ack(''), 'the ACK carried no SDP answer'],
    [
      'a codec callgate did not offer',
      ack(ANSWER.replace('RTP/AVP 8 101', 'RTP/AVP 18')),
      'answered 18, offered 8 0 101',
    ],
    [
      'a body that is not SDP',
      ack('hello', 'text/plain'),
      'the ACK body is text/plain, not application/sdp',
    ],
  ])(
    'should end the call with BYE and a Reason header when the ACK carries %s',
    async (_what, request, text) => {
      const { events, dialog } = await delayedCall();
      dialog.emit('ack', request);
      expect(dialog.destroyed).toEqual([{ headers: { Reason: `SIP ;cause=488 ;text="${text}"` } }]);
      expect(events).toEqual([{ type: 'ended', reason: 'rejected' }]);
    },
  );
});
