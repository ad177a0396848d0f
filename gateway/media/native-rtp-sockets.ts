/**
 * RTP sockets through callgate's native module (gateway/media/native/rtp_udp.c) instead of Node's
 * dgram: received datagrams reach JavaScript in batches, one call per event-loop wake-up instead
 * of one per datagram, and sends go straight to the kernel. Node's dgram spends about 4 µs of CPU
 * on each received datagram and 2 µs on each send before the kernel's own work; here both are a
 * fraction of that (bench/RESULTS.md).
 *
 * A datagram handed to a socket's handler is a view into its batch's buffer. The buffer is fresh
 * for every batch and never written again, so a view may be kept (the RTP parser's payload views,
 * a source's probation packets) exactly as a dgram message may.
 *
 * The module is built by `npm run build:native` (scripts/bootstrap.sh does it). Where it is not
 * built, `rtp.sockets: auto` falls back to dgram; `native` refuses to start.
 */
import type { RemoteInfo } from 'node:dgram';
import { CallgateError } from '../../config/errors.ts';
import type { RtpConfig } from '../../config/schema.ts';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

interface NativeBinding {
  start(onBatch: (data: Buffer, count: number) => void, meta: Int32Array): void;
  /** [fd, generation]: the generation tells this socket from later ones on the same descriptor. */
  open(ipv6: boolean, address: string, port: number): [number, number];
  setRemote(fd: number, address: string, port: number): boolean;
  send(fd: number, data: Buffer, more?: Buffer): number;
  close(fd: number): void;
  readonly META_INTS: number;
  readonly SLOT_BYTES: number;
  readonly BATCH_DATAGRAMS: number;
}

/** Where the module is built, beside this file's folder (and copied there in the image). */
const MODULE_PATH = fileURLToPath(new URL('./native/build/Release/rtp_udp.node', import.meta.url));

// Per datagram in the shared meta array (rtp_udp.c): fd, offset, length, port, family, address.
const M_FD = 0;
const M_OFFSET = 1;
const M_LENGTH = 2;
const M_PORT = 3;
const M_FAMILY = 4;
const M_ADDRESS = 5;
const M_GENERATION = 9;

/**
 * A datagram and its sender. `from` is the same object for a socket while its sender does not
 * change (only `size` is updated): copy what is kept, as RtpSession does with address and port.
 */
export type DatagramHandler = (data: Buffer, from: RemoteInfo) => void;

/** The native module, loaded and started once per process (or the reason it could not be). */
let loaded: NativeRtpSockets | Error | undefined;

export function nativeRtpSockets(): NativeRtpSockets | Error {
  if (loaded === undefined) {
    try {
      if (!existsSync(MODULE_PATH)) throw new Error(`${MODULE_PATH} is not built (npm run build:native)`);
      const binding = createRequire(import.meta.url)(MODULE_PATH) as NativeBinding;
      loaded = new NativeRtpSockets(binding);
    } catch (error) {
      loaded = error instanceof Error ? error : new Error(String(error));
    }
  }
  return loaded;
}

/**
 * The native module for `rtp.sockets`, or undefined for dgram: `node` never loads it, `auto` uses
 * it when it loads, `native` throws CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE when it does not.
 */
export function rtpSocketsEngine(choice: RtpConfig['sockets'], load: () => NativeRtpSockets | Error = nativeRtpSockets): NativeRtpSockets | undefined {
  if (choice === 'node') return undefined;
  const native = load();
  if (native instanceof NativeRtpSockets) return native;
  if (choice === 'native') throw new CallgateError('CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE', { reason: native.message }, { cause: native });
  return undefined;
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

  private dispatch(data: Buffer, count: number): void {
    const meta = this.meta;
    for (let i = 0; i < count; i++) {
      const base = i * this.metaInts;
      const socket = this.sockets[meta[base + M_FD] as number];
      // Closed since the batch was read, or another socket opened on its descriptor since.
      if (socket === undefined || socket.generation !== meta[base + M_GENERATION]) continue;
      const offset = meta[base + M_OFFSET] as number;
      const length = meta[base + M_LENGTH] as number;
      // Longer than its slot: the first SLOT_BYTES bytes, which is still too large for RTP.
      const view = data.subarray(offset, offset + Math.min(length, this.slotBytes));
      socket.receive(view, this.source(socket, base, length));
    }
  }

  /** The sender's RemoteInfo: the socket's last one while the same source sends (nearly always). */
  private source(socket: NativeRtpSocket, base: number, size: number): RemoteInfo {
    const meta = this.meta;
    const port = meta[base + M_PORT] as number;
    const ipv6 = meta[base + M_FAMILY] === 6;
    const a0 = meta[base + M_ADDRESS] as number;
    const a1 = meta[base + M_ADDRESS + 1] as number;
    const a2 = meta[base + M_ADDRESS + 2] as number;
    const a3 = meta[base + M_ADDRESS + 3] as number;
    const last = socket.lastSource;
    if (last !== undefined && socket.lastPort === port && socket.lastWords[0] === a0 && socket.lastWords[1] === a1 && socket.lastWords[2] === a2 && socket.lastWords[3] === a3 && (last.family === 'IPv6') === ipv6) {
      last.size = size;
      return last;
    }
    const at = (base + M_ADDRESS) * 4;
    const bytes = this.metaBytes.subarray(at, at + (ipv6 ? 16 : 4));
    const info: RemoteInfo = { address: ipv6 ? formatIpv6(bytes) : bytes.join('.'), family: ipv6 ? 'IPv6' : 'IPv4', port, size };
    socket.lastSource = info;
    socket.lastPort = port;
    socket.lastWords[0] = a0;
    socket.lastWords[1] = a1;
    socket.lastWords[2] = a2;
    socket.lastWords[3] = a3;
    return info;
  }
}

export class NativeRtpSocket {
  readonly fd: number;
  /** Which opening of `fd` this is: datagrams of an earlier socket on the same number are not its own. */
  readonly generation: number;
  /** The source of the last datagram, reused while it does not change (see NativeRtpSockets.source). */
  lastSource: RemoteInfo | undefined;
  lastPort = -1;
  readonly lastWords = new Int32Array(4);
  private readonly binding: NativeBinding;
  private readonly onMessage: DatagramHandler;
  private readonly onClose: () => void;
  private remoteAddress = '';
  private remotePort = -1;
  private closed = false;

  constructor(binding: NativeBinding, fd: number, generation: number, onMessage: DatagramHandler, onClose: () => void) {
    this.binding = binding;
    this.fd = fd;
    this.generation = generation;
    this.onMessage = onMessage;
    this.onClose = onClose;
  }

  receive(data: Buffer, from: RemoteInfo): void {
    if (!this.closed) this.onMessage(data, from);
  }

  /**
   * Sends one datagram (a header and a payload are gathered) now, in this call: the buffers may be
   * reused as soon as it returns. Returns 0, or the errno name when the kernel refused it (a full
   * send buffer, no route) or when `address` is not an IP literal.
   */
  send(data: Buffer | readonly Buffer[], port: number, address: string): string | 0 {
    if (this.closed) return 'EBADF';
    if (address !== this.remoteAddress || port !== this.remotePort) {
      if (!this.binding.setRemote(this.fd, address, port)) return 'EINVAL';
      this.remoteAddress = address;
      this.remotePort = port;
    }
    const result = Buffer.isBuffer(data)
      ? this.binding.send(this.fd, data)
      : data.length === 2
        ? this.binding.send(this.fd, data[0] as Buffer, data[1])
        : this.binding.send(this.fd, Buffer.concat(data));
    return result >= 0 ? 0 : errnoName(-result);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.binding.close(this.fd);
    this.onClose();
  }
}

/** The errno names a UDP send can meet; others by number. */
const SEND_ERRORS: Record<number, string> = { 1: 'EPERM', 9: 'EBADF', 11: 'EAGAIN', 13: 'EACCES', 22: 'EINVAL', 89: 'EDESTADDRREQ', 90: 'EMSGSIZE', 101: 'ENETUNREACH', 105: 'ENOBUFS', 111: 'ECONNREFUSED', 113: 'EHOSTUNREACH' };

function errnoName(errno: number): string {
  return SEND_ERRORS[errno] ?? `errno ${errno}`;
}

/** An IPv6 address as inet_ntop writes it (RFC 5952), the form Node gives in RemoteInfo. */
export function formatIpv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  const dotted = `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) keep a dotted tail.
  if (groups.slice(0, 5).every((g) => g === 0)) {
    if (groups[5] === 0xffff) return `::ffff:${dotted}`;
    if (groups[5] === 0 && groups[6] !== 0) return `::${dotted}`;
  }
  // The longest run of two or more zero groups (the first of equal runs) becomes "::".
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
