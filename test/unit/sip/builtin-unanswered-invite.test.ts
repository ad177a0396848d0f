/**
 * An INVITE the application never answers nor rejects (a bug, a hung handler) must not hold its
 * dialog and transaction forever: callgate answers 480 itself after the answer timeout (240*T1,
 * 2 minutes with the RFC T1; 1.2 s here with T1 = 5 ms) and forgets the call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import type { DialogEvent } from '../../../gateway/sip/signaling-driver.ts';
import { resolveTimers } from '../../../gateway/sip/sip-timers.ts';
import { UdpSipPeer } from './udp-sip-peer.ts';

const TIMERS = { t1Ms: 5, t2Ms: 20, t4Ms: 25 };
let driver: BuiltinSignalingDriver | undefined;
let peer: UdpSipPeer | undefined;
afterEach(async () => {
  peer?.close();
  await driver?.stop();
});

describe('when the application never settles an INVITE', () => {
  it('should answer 480 after the answer timeout, end the dialog, and hold nothing once the ACK is in', async () => {
    const events: DialogEvent[] = [];
    driver = new BuiltinSignalingDriver({
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
      timers: TIMERS,
    });
    driver.onCall((call) => call.dialog.on((event) => events.push(event)));
    await driver.start();
    const port = driver.port('udp') ?? 0;
    peer = await UdpSipPeer.open();
    const invite = peer.request('INVITE', { callId: 'never-answered' });
    const started = Date.now();
    peer.send(invite, port);
    await peer.waitFor('never-answered', /^SIP\/2\.0 100 /);
    expect(driver.retainedState()).toMatchObject({ dialogs: 1, pendingInvites: 1 });

    const answerTimeout = resolveTimers(TIMERS).answerTimeout;
    const rejected = await peer.waitFor('never-answered', /^SIP\/2\.0 480 /, answerTimeout + 2000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(answerTimeout - 5);
    const toTag = /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(rejected)?.[1];
    peer.send(
      invite
        .replace(/^INVITE /, 'ACK ')
        .replace('CSeq: 1 INVITE', 'CSeq: 1 ACK')
        .replace('To: <sip:100@127.0.0.1>', `To: <sip:100@127.0.0.1>;tag=${toTag ?? ''}`),
      port,
    );
    expect(events).toEqual([{ type: 'ended', reason: 'rejected' }]);
    // Timer I (T4) absorbs ACK copies, then the INVITE transaction goes too.
    await new Promise((resolve) => setTimeout(resolve, TIMERS.t4Ms + 100));
    expect(driver.retainedState()).toEqual({
      dialogs: 0,
      serverTransactions: 0,
      clientTransactions: 0,
      pendingInvites: 0,
    });
  });
});
