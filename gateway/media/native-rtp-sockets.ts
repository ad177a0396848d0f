/**
 * RTP sockets through callgate's native module (gateway/media/native/rtp_udp.c) instead of Node's
 * dgram: received datagrams reach JavaScript in batches, one call per event-loop wake-up instead
 * of one per datagram, and sends go straight to the kernel. `npm run bench -- udp` measures both
 * (bench/RESULTS.md): per received datagram about 2.3 µs of user CPU here against 4.3-5.0 µs on
 * dgram (5.5 against 6.6-7.0 µs with the kernel's), per send 1.0-1.5 against 2.3-3.1 µs.
 *
 * A datagram handed to a socket's handler is a view into its batch's buffer. The buffer is fresh
 * for every batch and never written again, so a view may be kept as a dgram message may; but it
 * keeps the whole batch alive, so what is kept for long is copied (RtpSession's probation packets).
 *
 * The module is built by `npm run build:native` (scripts/bootstrap.sh does it). Where it is not
 * built, `rtp.sockets: auto` falls back to dgram; `native` refuses to start.
 */
import type { RemoteInfo } from 'node:dgram';
import { CallgateError } from '../../config/errors.ts';
import type { RtpConfig } from '../../config/schema.ts';
import { formatIpv6 } from './ipv6-text.ts';
import { loadNativeBinding, type NativeBinding } from './native-rtp-binding.ts';
import { NativeRtpSocket, type DatagramHandler } from './native-rtp-socket.ts';

// Per datagram in the shared meta array (rtp_udp.c): fd, offset, length, port, family (4 or 6),
// the source address as four words, the socket's generation.
const M_FD = 0;
const M_OFFSET = 1;
const M_LENGTH = 2;
const M_PORT = 3;
const M_FAMILY = 4;
const M_ADDRESS = 5;
const M_GENERATION = 9;

/** The started module kept on the binding itself: a second copy of this file must not start it again. */
const STARTED = Symbol.for('callgate.nativeRtpSockets');

/**
 * The native module for this process (or worker thread), started once, or the reason it could not
 * be loaded or started. A start that failed (its epoll set or loop handle could not be made: EMFILE,
 * ENOMEM) is not kept, so a later call tries again.
 */
export function nativeRtpSockets(
  load: () => NativeBinding | Error = loadNativeBinding,
): NativeRtpSockets | Error {
  const binding = load();
  if (binding instanceof Error) return binding;
  const holder = binding as NativeBinding & { [STARTED]?: NativeRtpSockets };
  if (holder[STARTED] !== undefined) return holder[STARTED];
  try {
    holder[STARTED] = new NativeRtpSockets(binding);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const message = error instanceof Error ? error.message : String(error);
    return new Error(`start() failed${typeof code === 'string' ? ` (${code})` : ''}: ${message}`, {
      cause: error,
    });
  }
  return holder[STARTED];
}

/** Which RTP sockets `rtp.sockets` gives, and why not the native ones where they are not. */
export interface RtpSocketsChoice {
  readonly engine: 'native' | 'node';
  readonly native?: NativeRtpSockets;
  /** Set when `auto` fell back to dgram: why the module could not be used. */
  readonly fallbackReason?: string;
}

/**
 * `node` never loads the module, `auto` uses it when it loads and starts and says why not
 * otherwise, `native` throws CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE when it does not.
 */
export function chooseRtpSockets(
  choice: RtpConfig['sockets'],
  load: () => NativeRtpSockets | Error = nativeRtpSockets,
): RtpSocketsChoice {
  if (choice === 'node') return { engine: 'node' };
  const native = load();
  if (!(native instanceof Error)) return { engine: 'native', native };
  if (choice === 'native')
    throw new CallgateError(
      'CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE',
      { reason: native.message },
      { cause: native },
    );
  return { engine: 'node', fallbackReason: native.message };
}

/** The native module for `rtp.sockets`, or undefined for dgram (see chooseRtpSockets). */
export function rtpSocketsEngine(
  choice: RtpConfig['sockets'],
  load?: () => NativeRtpSockets | Error,
): NativeRtpSockets | undefined {
  return chooseRtpSockets(choice, load).native;
}

export class NativeRtpSockets {
  private readonly binding: NativeBinding;
  private readonly meta: Int32Array;
  private readonly metaBytes: Uint8Array;
  private readonly metaInts: number;
  private readonly slotBytes: number;
  /** Open sockets by file descriptor. */
  private readonly sockets: (NativeRtpSocket | undefined)[] = [];

  constructor(binding: NativeBinding) {
    this.binding = binding;
    this.metaInts = binding.META_INTS;
    this.slotBytes = binding.SLOT_BYTES;
    this.meta = new Int32Array(binding.META_INTS * binding.BATCH_DATAGRAMS);
    this.metaBytes = new Uint8Array(this.meta.buffer);
    binding.start((data, count) => this.dispatch(data, count), this.meta);
  }

  /** A socket bound on `address` (an IP literal) and `port`; throws the bind's error (its `code`: EADDRINUSE, ...). */
  open(address: string, port: number, onMessage: DatagramHandler): NativeRtpSocket {
    const [fd, generation] = this.binding.open(address.includes(':'), address, port);
    const socket = new NativeRtpSocket(this.binding, fd, generation, onMessage, () => {
      if (this.sockets[fd] === socket) this.sockets[fd] = undefined;
    });
    this.sockets[fd] = socket;
    return socket;
  }

  /**
   * Hands each datagram of a batch to its socket. One socket's handler that throws does not cost
   * the other sockets their datagrams: the first error is thrown again once the batch is done.
   */
  private dispatch(data: Buffer, count: number): void {
    const meta = this.meta;
    let failure: { error: unknown } | undefined;
    for (let i = 0; i < count; i++) {
      const base = i * this.metaInts;
      const socket = this.sockets[meta[base + M_FD] as number];
      // Closed since the batch was read, or another socket opened on its descriptor since.
      if (socket === undefined || socket.generation !== meta[base + M_GENERATION]) continue;
      const offset = meta[base + M_OFFSET] as number;
      const length = meta[base + M_LENGTH] as number;
      // Longer than its slot: the first SLOT_BYTES bytes, which is still too large for RTP.
      const view = data.subarray(offset, offset + Math.min(length, this.slotBytes));
      try {
        socket.receive(view, this.source(socket, base, length));
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== undefined) throw failure.error;
  }

  private source(socket: NativeRtpSocket, base: number, size: number): RemoteInfo {
    const meta = this.meta;
    const port = meta[base + M_PORT] as number;
    const ipv6 = meta[base + M_FAMILY] === 6;
    const key = ipv6 ? port + 65_536 : port;
    const a0 = meta[base + M_ADDRESS] as number;
    const a1 = meta[base + M_ADDRESS + 1] as number;
    const a2 = meta[base + M_ADDRESS + 2] as number;
    const a3 = meta[base + M_ADDRESS + 3] as number;
    const same = socket.sameSource(key, a0, a1, a2, a3, size);
    if (same !== undefined) return same;
    const at = (base + M_ADDRESS) * 4;
    const bytes = this.metaBytes.subarray(at, at + (ipv6 ? 16 : 4));
    const info: RemoteInfo = {
      address: ipv6 ? formatIpv6(bytes) : bytes.join('.'),
      family: ipv6 ? 'IPv6' : 'IPv4',
      port,
      size,
    };
    socket.rememberSource(info, key, a0, a1, a2, a3);
    return info;
  }
}
