/**
 * A call to a tenant with SRTP: a plain offer to a `required` tenant is refused with 488 and the
 * Warning "SRTP required" before any media is opened; an RTP/SAVP offer opens the media and hands
 * it the keys of the answer the dialog sent (not the probe's).
 */
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { rtpSchema, tenantSchema } from '../../../config/schema.ts';
import { CallSession } from '../../../gateway/call/call-session.ts';
import type { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import type { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { answerOffer } from '../../../gateway/sip/sdp-negotiation.ts';
import { parseSdp } from '../../../gateway/sip/sdp-parser.ts';
import type { InboundCall } from '../../../gateway/sip/signaling-driver.ts';
import type { SdpSession } from '../../../gateway/sip/sdp-types.ts';
import { exampleCatalogue } from '../../support/example-agents.ts';
import {
  FakeDelivery,
  FakeDialog,
  FakeModelSession,
  FakeRtp,
  ManualClock,
} from './call-harness.ts';

const theirKey = Buffer.alloc(30, 0x42).toString('base64');

function sdp(protocol: string, ...lines: string[]): SdpSession {
  const parsed = parseSdp(
    `${['v=0', 'o=- 1 1 IN IP4 192.0.2.10', 's=-', 'c=IN IP4 192.0.2.10', 't=0 0', `m=audio 4000 ${protocol} 0`, ...lines].join('\r\n')}\r\n`,
  );
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
}

interface Outcome {
  readonly started: boolean;
  readonly rejected: Array<[number, string | undefined, string | undefined]>;
  readonly opened: number;
  readonly rtp: FakeRtp;
  readonly dialog: FakeDialog;
  readonly answerKeys: unknown[];
}

async function callWith(
  srtp: 'off' | 'optional' | 'required',
  offer: SdpSession,
): Promise<Outcome> {
  const clock = new ManualClock();
  const rtp = new FakeRtp();
  const dialog = new FakeDialog();
  const tenant = tenantSchema.parse({
    id: 'tenant-s',
    numbers: ['+15550100'],
    agent: 'concierge',
    trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
    srtp,
  });
  const rejected: Outcome['rejected'] = [];
  const answerKeys: unknown[] = [];
  let opened = 0;
  const inbound: InboundCall = {
    callId: dialog.callId,
    caller: { uri: 'sip:+15550111@example.test', user: '+15550111' },
    identity: { caller: '+15550111', verified: false },
    calledNumber: '+15550100',
    tenant,
    agent: 'concierge',
    headers: [],
    offer,
    source: { address: '192.0.2.10', port: 5060, transport: 'udp' },
    receivedAt: 0,
    dialog,
    // As the drivers do: the answer is negotiated again, with a key of its own.
    accept: ({ local }) => {
      const answer = answerOffer(offer, {
        preference: tenant.codecs,
        local,
        sessionId: '1',
        sessionVersion: 1,
        srtp,
      });
      if (!answer.ok) return { ok: false, status: 488, reason: answer.detail };
      answerKeys.push(answer.media.srtp);
      return { ok: true, media: answer.media };
    },
    ring: () => undefined,
    reject: (status, reason, headers) =>
      rejected.push([
        status,
        reason,
        headers?.find((h) => h.name === 'Warning')?.value.match(/"(.*)"/)?.[1],
      ]),
  };
  const call = new CallSession({
    call: inbound,
    media: {
      config: rtpSchema.parse({}),
      ports: {} as RtpPortAllocator,
      scheduler: {} as PlayoutScheduler,
      timer: clock,
      open: async () => {
        opened++;
        return rtp;
      },
    },
    model: { openSession: () => new FakeModelSession() },
    catalogue: exampleCatalogue(),
    runtime: {
      handle: async () => ({ status: 'ok' }),
      toolsFor: () => [],
      inlineAnswer: () => undefined,
      settleInlineAnswer: async () => undefined,
    },
    delivery: new FakeDelivery(clock),
    ledger: { get: async () => undefined },
    registry: {
      open: async () => undefined,
      close: async () => undefined,
      appendEvent: async () => undefined,
    },
    gatewayId: 'gw-unit',
    log: new Logger({ level: 'error', sink: { write: () => undefined } }),
    clock,
  });
  const started = await call.start();
  return { started, rejected, opened, rtp, dialog, answerKeys };
}

describe('when a plain RTP offer reaches a tenant that requires SRTP', () => {
  it('should answer 488 with the Warning "SRTP required" and open no media', async () => {
    const outcome = await callWith('required', sdp('RTP/AVP'));
    expect(outcome.started).toBe(false);
    expect(outcome.rejected).toEqual([[488, 'Not Acceptable Here', 'SRTP required']]);
    expect(outcome.opened).toBe(0);
  });

  it('should answer 488 without that Warning when SRTP is off and the offer is RTP/SAVP only', async () => {
    const outcome = await callWith(
      'off',
      sdp('RTP/SAVP', `a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${theirKey}`),
    );
    expect(outcome.rejected).toEqual([[488, 'Not Acceptable Here', undefined]]);
  });
});

describe('when an RTP/SAVP offer reaches a tenant with SRTP', () => {
  it('should give the media the keys of the answer that was sent', async () => {
    const outcome = await callWith(
      'optional',
      sdp('RTP/SAVP', `a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${theirKey}`),
    );
    expect(outcome.started).toBe(true);
    expect(outcome.answerKeys).toHaveLength(1);
    expect(outcome.rtp.srtp).toEqual(outcome.answerKeys);
    expect(outcome.rtp.srtp[0]).toMatchObject({ remoteKey: Buffer.alloc(30, 0x42) });
  });

  it('should keep plain RTP for a plain offer to an optional tenant', async () => {
    const outcome = await callWith('optional', sdp('RTP/AVP'));
    expect(outcome.started).toBe(true);
    expect(outcome.rtp.srtp).toEqual([undefined]);
  });
});
