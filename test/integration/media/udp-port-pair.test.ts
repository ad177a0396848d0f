/**
 * UdpPortPair on both RTP socket engines: a send the kernel refuses is never thrown, and the pair
 * goes on sending. On the native sockets it reaches the pair's onError (which the session counts
 * in callgate_rtp_socket_errors_total); Node's dgram hands a send's error only to a per-send
 * callback, which the dgram path does not pass (it would cost a request object per packet), so
 * there it is not seen.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { nativeRtpSockets, NativeRtpSockets } from '../../../gateway/media/native-rtp-sockets.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { UdpPortPair } from '../../../gateway/media/udp-port-pair.ts';
import { waitFor } from './rtp-peer.ts';

/** A range of this file's own, apart from the other media tests' and the media bench's. */
const PORT_BASE = 56000 + 2 * ((process.pid * 43) % 1900);
const native = nativeRtpSockets();

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function receiver(): Promise<{ socket: Socket; port: number; got: Buffer[] }> {
  const socket = createSocket('udp4');
  const got: Buffer[] = [];
  socket.on('message', (data) => got.push(data));
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  cleanups.push(() => new Promise((resolve) => socket.close(() => resolve())));
  return { socket, port: socket.address().port, got };
}

describe.each(['native', 'node'] as const)(
  'when the kernel refuses a send on %s RTP sockets',
  (engine) => {
    it('should report it through onError, not throw, and send the next packet', async () => {
      if (engine === 'native') expect(native).toBeInstanceOf(NativeRtpSockets);
      const errors: NodeJS.ErrnoException[] = [];
      const pair = await UdpPortPair.bind({
        allocator: new RtpPortAllocator({ portMin: PORT_BASE, portMax: PORT_BASE + 19 }),
        address: '127.0.0.1',
        onRtp: () => {},
        onRtcp: () => {},
        onError: (error) => errors.push(error),
        maxUnsentPackets: 4,
        ...(engine === 'native' && { native: native as NativeRtpSockets }),
      });
      cleanups.push(() => pair.close());
      const peer = await receiver();
      const to = { address: '127.0.0.1', port: peer.port };
      // Larger than any UDP datagram can be (65,507 bytes of payload over IPv4).
      expect(() => pair.sendRtp(Buffer.alloc(70_000), to)).not.toThrow();
      pair.sendRtp(Buffer.from('next'), to);
      await waitFor(() => peer.got.length >= 1 && (engine === 'node' || errors.length >= 1), 1000);
      expect(errors.map((e) => e.code)).toEqual(engine === 'native' ? ['EMSGSIZE'] : []);
      expect(peer.got.map((d) => d.toString())).toEqual(['next']);
    });
  },
);
