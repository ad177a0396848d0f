/**
 * Stopping the built-in stack with a call up, over UDP on loopback: the caller gets a BYE (and
 * its retransmissions while the stack lives), but a caller that never answers it cannot hold the
 * shutdown for Timer F (64*T1, 32 s with the RFC's T1).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import { SHUTDOWN_BYE_WAIT_MS } from '../../../gateway/sip/sip-dialog.ts';
import type { DialogEvent } from '../../../gateway/sip/signaling-driver.ts';
import { UdpSipPeer } from './udp-sip-peer.ts';

let peer: UdpSipPeer | undefined;
afterEach(() => {
  peer?.close();
  peer = undefined;
});

const sdp = (port: number): string =>
  `v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio ${port} RTP/AVP 0\r\n`;

describe('when callgate stops while a call is up and the caller never answers the BYE', () => {
  it('should send the BYE with its reason and finish stopping within the bounded wait, not Timer F', async () => {
    const events: DialogEvent[] = [];
    const driver = new BuiltinSignalingDriver({
      // RFC timers (T1 500 ms): an unanswered BYE transaction would last 32 s.
      sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'] }),
      tenants: [
        tenantSchema.parse({
          id: 'acme',
          numbers: ['100'],
          agent: 'front-desk',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        }),
      ],
      logger: new Logger({ level: 'error', sink: { write: () => undefined } }),
    });
    driver.onCall((call) => {
      call.dialog.on((event) => events.push(event));
      call.accept({ local: { address: '127.0.0.1', port: 40_000 } });
    });
    await driver.start();
    const port = driver.port('udp') ?? 0;
    const caller = await UdpSipPeer.open();
    peer = caller;
    const callId = `shutdown-${Date.now()}`;
    caller.send(
      caller.request('INVITE', {
        callId,
        headers: { 'Content-Type': 'application/sdp' },
        body: sdp(4000),
      }),
      port,
    );
    const ok = await caller.waitFor(callId, /^SIP\/2\.0 200 /);
    const toTag = /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(ok)?.[1] ?? '';
    caller.send(caller.request('ACK', { callId, toTag }), port);
    const deadline = Date.now() + 2_000;
    while (!events.some((event) => event.type === 'ack') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 5));

    const started = Date.now();
    await driver.stop();
    const took = Date.now() - started;
    const byes = caller.messages(callId).filter((text) => text.startsWith('BYE '));
    expect(byes.length).toBeGreaterThanOrEqual(1);
    expect(events.at(-1)).toEqual({ type: 'ended', reason: 'shutdown' });
    expect(took).toBeGreaterThanOrEqual(SHUTDOWN_BYE_WAIT_MS - 50);
    expect(took).toBeLessThan(SHUTDOWN_BYE_WAIT_MS + 3_000);
  });
});
