/**
 * One RTP socket of callgate's native module (see native-rtp-sockets.ts, which opens them and
 * hands each its datagrams).
 */
import type { RemoteInfo } from 'node:dgram';
import { getSystemErrorName } from 'node:util';
import type { NativeBinding } from './native-rtp-binding.ts';

/**
 * A datagram and its sender. `from` is the same object for a socket while its sender does not
 * change (only `size` is updated): copy what is kept, as RtpSession does with address and port.
 */
export type DatagramHandler = (data: Buffer, from: RemoteInfo) => void;

export class NativeRtpSocket {
  readonly fd: number;
  /** Which opening of `fd` this is: datagrams of an earlier socket on the same number are not its own. */
  readonly generation: number;
  private readonly binding: NativeBinding;
  private readonly onMessage: DatagramHandler;
  private readonly onClose: () => void;
  /** The source of the last datagram and its address words, reused while it does not change. */
  private lastSource: RemoteInfo | undefined;
  private readonly lastWords = new Int32Array(5);
  private remoteAddress = '';
  private remotePort = -1;
  private closed = false;

  constructor(
    binding: NativeBinding,
    fd: number,
    generation: number,
    onMessage: DatagramHandler,
    onClose: () => void,
  ) {
    this.binding = binding;
    this.fd = fd;
    this.generation = generation;
    this.onMessage = onMessage;
    this.onClose = onClose;
  }

  /**
   * The last datagram's RemoteInfo, with `size` updated, when this one comes from the same source:
   * `key` (its port, plus 65,536 for IPv6) and its address's four words as the module gives them.
   * Nearly always; otherwise undefined, and the caller remembers the new one.
   */
  sameSource(
    key: number,
    a0: number,
    a1: number,
    a2: number,
    a3: number,
    size: number,
  ): RemoteInfo | undefined {
    const last = this.lastSource;
    const words = this.lastWords;
    if (
      last === undefined ||
      words[0] !== key ||
      words[1] !== a0 ||
      words[2] !== a1 ||
      words[3] !== a2 ||
      words[4] !== a3
    )
      return undefined;
    last.size = size;
    return last;
  }

  rememberSource(
    info: RemoteInfo,
    key: number,
    a0: number,
    a1: number,
    a2: number,
    a3: number,
  ): void {
    this.lastSource = info;
    const words = this.lastWords;
    words[0] = key;
    words[1] = a0;
    words[2] = a1;
    words[3] = a2;
    words[4] = a3;
  }

  receive(data: Buffer, from: RemoteInfo): void {
    if (!this.closed) this.onMessage(data, from);
  }

  /**
   * Sends one datagram (a header and a payload are gathered) now, in this call: the buffers may be
   * reused as soon as it returns. Returns 0, or the errno name when the kernel refused it (a full
   * send buffer, no route) or when `address` is not an IP literal (EINVAL).
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
    return result >= 0 ? 0 : getSystemErrorName(result);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.binding.close(this.fd);
    this.onClose();
  }
}
