/**
 * The socket edge of a call's media: an RTP socket on an even port and an RTCP socket on the
 * port above, bound on the configured address. A port that some other process holds is skipped
 * (it goes back to the allocator) and the next one is tried. The RTP socket is a native one
 * (native-rtp-sockets.ts) when the pair is given the native module, a dgram socket otherwise;
 * RTCP, a packet every few seconds, is always dgram.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { lookup as dnsLookup, type LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';
import { CallgateError, isCallgateError } from '../../config/errors.ts';
import type { NativeRtpSocket } from './native-rtp-socket.ts';
import type { NativeRtpSockets } from './native-rtp-sockets.ts';
import type { RtpPortAllocator } from './rtp-port-allocator.ts';
import type { RtpEndpoint } from './rtp-session-events.ts';
import { SendBufferRing } from './send-buffer-ring.ts';

/** After a failed lookup of a host name to send to, packets to it are dropped this long before another. */
const HOST_RETRY_MS = 5_000;
/** Ports tried before giving up on binding: enough to step over a few held by other processes. */
const MAX_BIND_ATTEMPTS = 16;

export interface UdpPortPairOptions {
  readonly allocator: RtpPortAllocator;
  readonly address: string;
  readonly onRtp: (data: Buffer, from: RemoteInfo) => void;
  readonly onRtcp: (data: Buffer, from: RemoteInfo) => void;
  /** Socket errors after binding (ICMP unreachable and the like): counted, never thrown. */
  readonly onError: (error: Error) => void;
  /** RTP packets built before the first of them is sent, at most (see `rtpPacketBuffer`). */
  readonly maxUnsentPackets: number;
  /** RTP through the native module (see rtpSocketsEngine); dgram when absent. */
  readonly native?: NativeRtpSockets;
}

/** What the pair needs of its RTP socket, dgram or native. */
interface RtpChannel {
  send(data: Buffer | readonly Buffer[], port: number, address: string): void;
  /** Datagrams handed to the socket and not yet to the kernel. */
  queued(): number;
  close(): Promise<void>;
}

export class UdpPortPair {
  readonly port: number;
  private readonly allocator: RtpPortAllocator;
  private readonly rtp: RtpChannel;
  private readonly rtcp: Socket;
  private readonly rtpBuffers: SendBufferRing;
  private readonly onError: (error: Error) => void;
  /** The last remote address found to be an IP literal (sent to at once, see rtpPacketBuffer). */
  private literalRemote = '';
  private closed = false;

  private constructor(
    allocator: RtpPortAllocator,
    port: number,
    rtp: RtpChannel,
    rtcp: Socket,
    options: UdpPortPairOptions,
  ) {
    this.allocator = allocator;
    this.onError = options.onError;
    this.port = port;
    this.rtp = rtp;
    this.rtcp = rtcp;
    this.rtpBuffers = new SendBufferRing(() => rtp.queued(), options.maxUnsentPackets + 1);
  }

  static async bind(options: UdpPortPairOptions): Promise<UdpPortPair> {
    let lastError: unknown;
    for (let attempt = 0; attempt < MAX_BIND_ATTEMPTS; attempt++) {
      const port = options.allocator.allocate();
      const type = options.address.includes(':') ? 'udp6' : 'udp4';
      const rtcp = createSocket({ type, lookup: literalLookup });
      let rtp: RtpChannel | undefined;
      try {
        rtp =
          options.native === undefined
            ? await dgramChannel(type, port, options)
            : nativeChannel(options.native, port, options);
        await bindSocket(rtcp, port + 1, options.address);
      } catch (error) {
        lastError = error;
        await Promise.all([rtp?.close(), closeSocket(rtcp)]);
        options.allocator.release(port);
        if (isCallgateError(error)) throw error;
        continue;
      }
      rtcp.on('message', options.onRtcp);
      rtcp.on('error', options.onError);
      return new UdpPortPair(options.allocator, port, rtp, rtcp, options);
    }
    throw new CallgateError(
      'CALLGATE_ERR_LISTEN_FAILED',
      { address: `${options.address} (RTP)`, reason: String(lastError) },
      { cause: lastError },
    );
  }

  /**
   * A buffer to build an RTP datagram for `to` in, to be given to sendRtp() before
   * `maxUnsentPackets` more are taken. It may be one sent before: only while the socket has
   * nothing queued, and only for an IP literal, which is sent within the send() call; a host name
   * is looked up first, so on dgram its datagram waits in Node with the buffer, and gets a fresh
   * one (the native sockets drop it until the name is known, and never hold a buffer).
   */
  rtpPacketBuffer(length: number, to: RtpEndpoint): Buffer {
    if (this.closed) return Buffer.allocUnsafe(length);
    if (to.address !== this.literalRemote) {
      if (isIP(to.address) === 0) return Buffer.allocUnsafe(length);
      this.literalRemote = to.address;
    }
    return this.rtpBuffers.take(length);
  }

  /**
   * One datagram; the buffer must not be changed afterwards (dgram may send it later), except as
   * rtpPacketBuffer() allows. A send that fails goes to onError on the native sockets; dgram drops it unseen.
   */
  sendRtp(data: Buffer | readonly Buffer[], to: RtpEndpoint): void {
    if (!this.closed) this.rtp.send(data, to.port, to.address);
  }

  /** One RTCP datagram. Never throws: what dgram refuses at once (a bad port or address) goes to onError. */
  sendRtcp(data: Buffer, to: RtpEndpoint): void {
    if (this.closed) return;
    try {
      this.rtcp.send(data, to.port, to.address);
    } catch (error) {
      this.onError(error instanceof Error ? error : new Error(String(error)));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.rtp.close(), closeSocket(this.rtcp)]);
    this.allocator.release(this.port);
  }
}

async function dgramChannel(
  type: 'udp4' | 'udp6',
  port: number,
  options: UdpPortPairOptions,
): Promise<RtpChannel> {
  const socket = createSocket({ type, lookup: literalLookup });
  try {
    await bindSocket(socket, port, options.address);
  } catch (error) {
    await closeSocket(socket);
    throw error;
  }
  socket.on('message', options.onRtp);
  socket.on('error', options.onError);
  return {
    send: (data, toPort, address) => socket.send(data, toPort, address),
    queued: () => socket.getSendQueueCount(),
    close: () => closeSocket(socket),
  };
}

function nativeChannel(
  native: NativeRtpSockets,
  port: number,
  options: UdpPortPairOptions,
): RtpChannel {
  const socket: NativeRtpSocket = native.open(options.address, port, options.onRtp);
  const family = options.address.includes(':') ? 6 : 4;
  // Host names (legal in SDP, rare) are looked up once; their packets are dropped until then, and
  // for HOST_RETRY_MS after a failed lookup. The caller's own packets latch a literal soon anyway.
  const named = new Map<string, { address: string } | { retryAt: number }>();
  let closed = false;
  return {
    send: (data, toPort, address) => {
      let to = address;
      if (named.size > 0) {
        const name = named.get(address);
        if (name !== undefined) {
          if ('address' in name) to = name.address;
          else if (performance.now() < name.retryAt) return;
        }
      }
      const refused = socket.send(data, toPort, to);
      if (refused === 0) return;
      if (refused === 'EINVAL' && isIP(to) === 0) {
        // Looking it up: no second lookup before this one answers.
        named.set(address, { retryAt: Number.POSITIVE_INFINITY });
        dnsLookup(address, { family }, (error, found) => {
          if (closed) return;
          if (error !== null) {
            named.set(address, { retryAt: performance.now() + HOST_RETRY_MS });
            options.onError(error);
          } else {
            named.set(address, { address: found });
          }
        });
        return;
      }
      // To the session, which counts it (callgate_rtp_socket_errors_total); never thrown. (A dgram
      // send's error goes only to a per-send callback, which the dgram path does not pass.)
      options.onError(
        Object.assign(new Error(`send ${refused} ${address}:${toPort}`), { code: refused }),
      );
    },
    // Sent within send(): a buffer is the kernel's copy as soon as send() returns.
    queued: () => 0,
    close: async () => {
      closed = true;
      socket.close();
    },
  };
}

/** The IP literal last resolved (process-wide: most media goes to a few addresses). */
const lastLiteral = { hostname: '', family: 0 };

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string,
  family: number,
) => void;

/**
 * Remote media addresses are IP literals (SDP c= lines, the latched source). Node resolves the
 * address of every datagram through dns.lookup, which answers literals on the next tick: a queued
 * callback and an async hop per packet. Answering literals at once sends in the same tick; a
 * host name (legal in SDP, rare) still goes through the resolver.
 */
function literalLookup(
  hostname: string,
  options: LookupOneOptions | number,
  callback: LookupCallback,
): void {
  // A call sends to one address for its whole life: remember the last answer instead of testing
  // the literal again for every packet.
  if (hostname === lastLiteral.hostname) {
    callback(null, hostname, lastLiteral.family);
    return;
  }
  const family = isIP(hostname);
  if (family !== 0) {
    lastLiteral.hostname = hostname;
    lastLiteral.family = family;
    callback(null, hostname, family);
    return;
  }
  dnsLookup(hostname, typeof options === 'number' ? { family: options } : options, callback);
}

function bindSocket(socket: Socket, port: number, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    socket.once('error', onError);
    socket.bind({ port, address, exclusive: true }, () => {
      socket.off('error', onError);
      resolve();
    });
  });
}

function closeSocket(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    try {
      socket.close(() => resolve());
    } catch {
      // Never bound or already closed.
      resolve();
    }
  });
}
