/**
 * The demo's phone, signaling half: a small SIP user agent client over UDP on loopback. It places
 * one call (INVITE with an SDP offer, ACK, BYE), answers whatever callgate sends inside the dialog
 * (BYE, INFO, re-INVITE) with 200, retransmits like RFC 3261 timers A and E, and records every
 * message it sent or received as its first line, for the demo's timeline.
 */
import { createSocket, type Socket } from 'node:dgram';
import { parseSipMessage } from '../sip/message-parser.ts';
import type { SipRequest, SipResponse } from '../sip/message-types.ts';
import { newBranch, newCallId, newTag } from '../sip/sip-ids.ts';

/** RFC 3261 T1: the first retransmission interval over UDP; doubled up to T2. */
const T1_MS = 500;
const T2_MS = 4_000;
/** How long the INVITE may go unanswered (no final response) before the call counts as failed. */
export const INVITE_TIMEOUT_MS = 10_000;
/** How long a BYE may go unanswered; the call is over for the caller either way. */
export const BYE_TIMEOUT_MS = 4_000;

export interface SipTrace {
  readonly at: number;
  readonly direction: 'sent' | 'received';
  readonly firstLine: string;
}

export interface DemoSipCallerOptions {
  readonly host: string;
  readonly port: number;
  /** The number dialled (the demo tenant's number). */
  readonly number: string;
  /** The caller's number, shown as the From user. */
  readonly callerNumber: string;
}

export interface Answered {
  readonly status: number;
  /** The SDP answer. */
  readonly sdp: string;
}

type Pending = { readonly method: string; readonly resolve: (response: SipResponse) => void };

export class DemoSipCaller {
  readonly trace: SipTrace[] = [];
  private readonly socket: Socket;
  private readonly callId: string;
  private readonly fromTag = newTag();
  private toTag: string | undefined;
  private remoteTarget: string;
  private cseq = 0;
  private readonly pending = new Map<number, Pending>();
  private ack: Buffer | undefined;
  private byeListeners: (() => void)[] = [];
  /** Set when callgate ended the call with its own BYE. */
  remoteHungUp = false;
  private closed = false;
  private offer = '';

  private constructor(
    private readonly options: DemoSipCallerOptions,
    socket: Socket,
  ) {
    this.socket = socket;
    this.callId = newCallId('127.0.0.1');
    this.remoteTarget = `sip:${options.number}@${options.host}:${options.port}`;
    socket.on('message', (data) => this.receive(data));
  }

  static async open(options: DemoSipCallerOptions): Promise<DemoSipCaller> {
    const socket = createSocket(options.host.includes(':') ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, options.host, () => resolve());
    });
    return new DemoSipCaller(options, socket);
  }

  get localPort(): number {
    return this.socket.address().port;
  }

  get sipCallId(): string {
    return this.callId;
  }

  /** Sends the INVITE and resolves with the 200's SDP once it is acknowledged; rejects on a failure response or silence. */
  async invite(sdpOffer: string): Promise<Answered> {
    this.offer = sdpOffer;
    const seq = ++this.cseq;
    const branch = newBranch();
    const request = this.request(
      'INVITE',
      seq,
      branch,
      `sip:${this.options.number}@${this.options.host}:${this.options.port}`,
      sdpOffer,
      'application/sdp',
    );
    const response = await this.transact(seq, 'INVITE', request, INVITE_TIMEOUT_MS, true);
    if (response.status < 200 || response.status >= 300) {
      // A failure response is acknowledged within its own transaction (same branch).
      this.send(
        this.request(
          'ACK',
          seq,
          branch,
          `sip:${this.options.number}@${this.options.host}:${this.options.port}`,
        ),
      );
      throw new Error(`callgate refused the call: ${response.status} ${response.reason}`);
    }
    return { status: response.status, sdp: response.body };
  }

  /** Hangs up with BYE; resolves when callgate answered (or after BYE_TIMEOUT_MS). */
  async hangup(): Promise<number | undefined> {
    if (this.remoteHungUp || this.toTag === undefined) return undefined;
    const seq = ++this.cseq;
    const response = await this.transact(
      seq,
      'BYE',
      this.request('BYE', seq, newBranch(), this.remoteTarget),
      BYE_TIMEOUT_MS,
      false,
    ).catch(() => undefined);
    return response?.status;
  }

  /** Called when callgate sends BYE. */
  onRemoteBye(listener: () => void): void {
    this.byeListeners.push(listener);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const pending of this.pending.values()) pending.resolve({ status: 408 } as SipResponse);
    this.pending.clear();
    this.socket.close();
  }

  private transact(
    seq: number,
    method: string,
    request: Buffer,
    timeoutMs: number,
    invite: boolean,
  ): Promise<SipResponse> {
    return new Promise<SipResponse>((resolve, reject) => {
      let interval = T1_MS;
      let provisional = false;
      let timer: NodeJS.Timeout | undefined;
      const retransmit = (): void => {
        // An INVITE that got a provisional answer is not retransmitted (timer A stops).
        if (invite && provisional) return;
        this.send(request);
        timer = setTimeout(retransmit, interval);
        interval = Math.min(interval * 2, T2_MS);
      };
      const deadline = setTimeout(() => {
        clearTimeout(timer);
        this.pending.delete(seq);
        reject(new Error(`no final answer to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(seq, {
        method,
        resolve: (response) => {
          if (response.status < 200) {
            provisional = true;
            return;
          }
          clearTimeout(timer);
          clearTimeout(deadline);
          this.pending.delete(seq);
          resolve(response);
        },
      });
      retransmit();
    });
  }

  private receive(data: Buffer): void {
    const parsed = parseSipMessage(data);
    if (!parsed.ok) return;
    const message = parsed.value;
    if (message.kind === 'response') {
      this.record('received', `SIP/2.0 ${message.status} ${message.reason}`);
      this.onResponse(message);
      return;
    }
    this.record('received', `${message.method} ${message.uriText} SIP/2.0`);
    this.onRequest(message);
  }

  private onResponse(response: SipResponse): void {
    if (response.cseq.method === 'INVITE' && response.status >= 200 && response.status < 300) {
      this.toTag ??= response.to.params.find(([name]) => name === 'tag')?.[1] ?? undefined;
      const contact = response.headers
        .find((h) => h.name === 'Contact')
        ?.value.match(/<([^>]+)>/)?.[1];
      if (contact !== undefined) this.remoteTarget = contact;
      // The ACK of a 2xx is its own transaction; a retransmitted 200 gets the same ACK again.
      this.ack ??= this.request('ACK', response.cseq.seq, newBranch(), this.remoteTarget);
      this.send(this.ack);
    }
    this.pending.get(response.cseq.seq)?.resolve(response);
  }

  private onRequest(request: SipRequest): void {
    if (request.method === 'ACK') return;
    // A re-INVITE keeps the media as offered: the demo's phone has one codec and one address.
    this.send(
      this.response(request, 200, 'OK', request.method === 'INVITE' ? this.offer : undefined),
    );
    if (request.method === 'BYE' && !this.remoteHungUp) {
      this.remoteHungUp = true;
      for (const listener of this.byeListeners) listener();
    }
  }

  private request(
    method: string,
    seq: number,
    branch: string,
    uri: string,
    body = '',
    contentType?: string,
  ): Buffer {
    const local = `${this.options.host.includes(':') ? `[${this.options.host}]` : this.options.host}:${this.localPort}`;
    const to = `<sip:${this.options.number}@${this.options.host}:${this.options.port}>${this.toTag !== undefined ? `;tag=${this.toTag}` : ''}`;
    const lines = [
      `${method} ${uri} SIP/2.0`,
      `Via: SIP/2.0/UDP ${local};branch=${branch};rport`,
      'Max-Forwards: 70',
      `From: "callgate demo" <sip:${this.options.callerNumber}@${local}>;tag=${this.fromTag}`,
      `To: ${to}`,
      `Call-ID: ${this.callId}`,
      `CSeq: ${seq} ${method}`,
      `Contact: <sip:demo@${local}>`,
      'User-Agent: callgate-demo',
      ...(contentType !== undefined ? [`Content-Type: ${contentType}`] : []),
      `Content-Length: ${Buffer.byteLength(body)}`,
      '',
      body,
    ];
    return Buffer.from(lines.join('\r\n'));
  }

  private response(request: SipRequest, status: number, reason: string, body?: string): Buffer {
    const copy = (name: string): string[] =>
      request.headers.filter((h) => h.name === name).map((h) => `${name}: ${h.value}`);
    const lines = [
      `SIP/2.0 ${status} ${reason}`,
      ...copy('Via'),
      ...copy('From'),
      ...copy('To'),
      ...copy('Call-ID'),
      ...copy('CSeq'),
      'User-Agent: callgate-demo',
      ...(body !== undefined ? ['Content-Type: application/sdp'] : []),
      `Content-Length: ${Buffer.byteLength(body ?? '')}`,
      '',
      body ?? '',
    ];
    return Buffer.from(lines.join('\r\n'));
  }

  private send(message: Buffer): void {
    if (this.closed) return;
    const firstLine = message.subarray(0, message.indexOf('\r\n')).toString();
    this.record('sent', firstLine);
    this.socket.send(message, this.options.port, this.options.host);
  }

  private record(direction: SipTrace['direction'], firstLine: string): void {
    this.trace.push({ at: Date.now(), direction, firstLine });
  }
}
