/** Loopback ports for the processes tests start. */
import { createSocket } from 'node:dgram';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';

/**
 * A loopback port free for both TCP and UDP. SIP peers (callgate, sipp, baresip) listen on both,
 * and a port found free for TCP may be an RTP port of a gateway that another test runs.
 */
export async function freeSipPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freeLoopbackPort();
    const free = await new Promise<boolean>((resolve) => {
      const socket = createSocket('udp4');
      socket.once('error', () => resolve(false));
      socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no loopback port free for both TCP and UDP');
}
