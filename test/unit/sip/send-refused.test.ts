/**
 * A message no socket can take (port 0, port above 65535, a socket already closed). The transports
 * say so instead of throwing, and a transaction whose message is refused ends at once: its
 * outcome settles, its timers stop, it leaves the driver's maps. Before, dgram and net threw
 * ERR_SOCKET_BAD_PORT through the transaction, before its timers were armed, and it stayed forever.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { ClientTransaction } from '../../../gateway/sip/client-transaction.ts';
import { InviteServerTransaction } from '../../../gateway/sip/invite-server-transaction.ts';
import { NonInviteServerTransaction } from '../../../gateway/sip/non-invite-server-transaction.ts';
import { resolveTimers } from '../../../gateway/sip/sip-timers.ts';
import type { SipTransport } from '../../../gateway/sip/sip-transport.ts';
import { TcpTransport } from '../../../gateway/sip/tcp-transport.ts';
import { UdpTransport } from '../../../gateway/sip/udp-transport.ts';

const logger = new Logger({ level: 'error', sink: { write: () => undefined } });
const timers = resolveTimers({ t1Ms: 5, t2Ms: 20, t4Ms: 25 });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let transport: SipTransport | undefined;
afterEach(async () => {
  await transport?.stop();
  transport = undefined;
});

describe('when a transport is asked to send where no socket can', () => {
  const udp = (): SipTransport =>
    new UdpTransport({
      address: '127.0.0.1',
      port: 0,
      receiveBufferBytes: 65_536,
      onMessage: () => undefined,
      logger,
    });
  const tcp = (): SipTransport =>
    new TcpTransport({
      address: '127.0.0.1',
      port: 0,
      maxHeaderBytes: 4096,
      maxBodyBytes: 4096,
      idleTimeoutMs: 5000,
      onMessage: () => undefined,
      onDrop: () => undefined,
      logger,
    });

  it.each([
    ['UDP', udp, 'udp'],
    ['TCP', tcp, 'tcp'],
  ] as const)(
    'should refuse port 0 and 65536 over %s without throwing',
    async (_name, make, name) => {
      const started = make();
      transport = started;
      await started.start();
      for (const port of [0, 65_536, -1]) {
        expect(
          started.send(Buffer.from('OPTIONS'), { transport: name, address: '127.0.0.1', port }),
        ).toEqual({ ok: false, reason: `unusable port ${port}` });
      }
    },
  );

  it('should refuse a send on a UDP socket already stopped', async () => {
    const started = udp();
    await started.start();
    await started.stop();
    expect(
      started.send(Buffer.from('OPTIONS'), { transport: 'udp', address: '127.0.0.1', port: 5060 }),
    ).toMatchObject({ ok: false });
  });
});

describe('when a transaction message is refused by the transport', () => {
  it('should end a client transaction at once with transport-error, and send nothing more', async () => {
    let sent = 0;
    let terminated = 0;
    const transaction = new ClientTransaction({
      invite: false,
      request: Buffer.from('BYE'),
      timers,
      reliable: false,
      send: () => (sent++, false),
      onRetransmit: () => undefined,
      onTerminated: () => terminated++,
    });
    transaction.start();
    await expect(transaction.outcome).resolves.toEqual({ type: 'transport-error' });
    await sleep(timers.transactionTimeout + 20);
    expect({ sent, terminated }).toEqual({ sent: 1, terminated: 1 });
  });

  it('should end a client transaction whose retransmission is refused', async () => {
    let sent = 0;
    let terminated = 0;
    const transaction = new ClientTransaction({
      invite: true,
      request: Buffer.from('INVITE'),
      timers,
      reliable: false,
      send: () => ++sent === 1,
      onRetransmit: () => undefined,
      onTerminated: () => terminated++,
    });
    transaction.start();
    await expect(transaction.outcome).resolves.toEqual({ type: 'transport-error' });
    await sleep(timers.transactionTimeout + 20);
    expect({ sent, terminated }).toEqual({ sent: 2, terminated: 1 });
  });

  it('should end a non-INVITE server transaction whose first response is refused (no Timer J left)', async () => {
    let terminated = 0;
    const transaction = new NonInviteServerTransaction({
      timers,
      reliable: false,
      send: () => false,
      onRetransmit: () => undefined,
      onTerminated: () => terminated++,
    });
    transaction.respond(200, Buffer.from('200'));
    expect(terminated).toBe(1);
  });

  it('should end an INVITE server transaction whose 2xx retransmission is refused, and report it once', async () => {
    let sent = 0;
    let terminated = 0;
    let failures = 0;
    let timeouts = 0;
    const transaction = new InviteServerTransaction({
      timers,
      reliable: false,
      send: () => ++sent === 1,
      onRetransmit: () => undefined,
      onAckTimeout: () => timeouts++,
      onTransportError: () => failures++,
      onTerminated: () => terminated++,
    });
    transaction.respond(200, Buffer.from('200'));
    await sleep(timers.ackTimeout + 20);
    expect({ sent, terminated, failures, timeouts, state: transaction.state }).toEqual({
      sent: 2,
      terminated: 1,
      failures: 1,
      timeouts: 0,
      state: 'terminated',
    });
  });
});
