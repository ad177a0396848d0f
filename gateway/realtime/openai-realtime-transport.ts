/**
 * The WebSocket under an OpenAIRealtimeSession: opening it, keepalive, sending, and one close
 * cause. Whatever ends the socket is recorded once, and the first cause wins: a later one (the
 * close() that follows an abort, the socket error that follows a refused frame) never rewrites
 * why the session ended (test/integration/realtime/disconnect.test.ts).
 */
import WebSocket, { type RawData } from 'ws';
import type { DisconnectReason } from './realtime-session.ts';

/**
 * Keepalive: a ping this often keeps NAT and load-balancer idle timers (often 60 s) from closing a
 * quiet socket; a pong missing for PONG_TIMEOUT_MS (below the interval) declares the link dead.
 */
export const PING_INTERVAL_MS = 20_000;
export const PONG_TIMEOUT_MS = 10_000;
/** close() waits this long for the close handshake before terminating the socket. */
export const CLOSE_TIMEOUT_MS = 2_000;

/** The provider's wording when it ends a session at its maximum duration. */
export const SESSION_LIMIT_TEXT = /maximum duration/i;

/** Why the socket ended, as the session reports it; `detail` is used when the close frame has no reason. */
export interface CloseCause {
  readonly reason: DisconnectReason;
  readonly detail?: string;
}

export interface TransportClosed {
  readonly cause: CloseCause;
  readonly code: number;
  readonly reasonText: string;
}

export interface OpenAIRealtimeTransportOptions {
  url: URL;
  apiKey?: string;
  maxFrameBytes: number;
  handshakeTimeoutMs: number;
  pingIntervalMs?: number;
  pongTimeoutMs?: number;
  onFrame: (data: RawData, isBinary: boolean) => void;
  /** A frame above maxFrameBytes arrived; ws closes the socket next (1009). */
  onFrameTooLarge: () => void;
  onSocketError: (error: Error) => void;
  onClose: (closed: TransportClosed) => void;
  /** Wraps a timer callback so that it cannot throw. */
  guarded: (what: string, callback: () => void) => () => void;
}

export class OpenAIRealtimeTransport {
  private readonly ws: WebSocket;
  private cause: CloseCause | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private awaitingPongSince: number | undefined;
  private closed = false;

  constructor(private readonly options: OpenAIRealtimeTransportOptions) {
    // GA: Bearer auth only; the beta's OpenAI-Beta header must not be sent.
    const headers: Record<string, string> = {};
    if (options.apiKey !== undefined) headers.Authorization = `Bearer ${options.apiKey}`;
    const ws = new WebSocket(options.url, {
      headers,
      maxPayload: options.maxFrameBytes,
      handshakeTimeout: options.handshakeTimeoutMs,
      perMessageDeflate: false,
    });
    this.ws = ws;
    ws.on('message', (data, isBinary) => options.onFrame(data, isBinary));
    ws.on('error', (error) => this.onSocketError(error));
    ws.on('close', (code, reason) => this.onClose(code, reason.toString()));
    ws.on('pong', () => {
      this.awaitingPongSince = undefined;
    });
    ws.on('open', () => this.startKeepalive());
  }

  /** Bytes ws and the socket still hold. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  /** Records why the socket is ending; the first cause recorded is the one reported. */
  setCloseCause(cause: CloseCause): void {
    this.cause ??= cause;
  }

  sendText(text: string): void {
    this.ws.send(text);
  }

  /** A Buffer sent as a text frame (the audio hot path, see README "Pitfalls"). */
  sendFrame(bytes: Buffer, options: { readonly binary: false }): void {
    this.ws.send(bytes, options);
  }

  /** Closes with a close frame (the handshake may still fail). */
  close(code: number, reason: string): void {
    this.ws.close(code, reason);
  }

  /** Closes and resolves once closed; terminates the socket if the handshake takes too long. */
  async closeAndWait(code: number, reason: string): Promise<void> {
    if (this.closed) return;
    const closed = new Promise<void>((resolve) => this.ws.once('close', () => resolve()));
    this.ws.close(code, reason);
    const timer = setTimeout(() => this.ws.terminate(), CLOSE_TIMEOUT_MS);
    await closed;
    clearTimeout(timer);
  }

  /** Drops the socket at once, for `cause`. */
  terminate(cause: CloseCause): void {
    this.setCloseCause(cause);
    this.ws.terminate();
  }

  private startKeepalive(): void {
    const period = Math.min(
      this.options.pingIntervalMs ?? PING_INTERVAL_MS,
      this.options.pongTimeoutMs ?? PONG_TIMEOUT_MS,
    );
    // The first check comes at a random point of the first period, the others a period apart:
    // sessions opened together (a burst of calls) would otherwise ping in the same millisecond
    // every period, a socket write each and their pongs to read, while every call waits.
    const keepalive = this.options.guarded('keepalive', () => this.keepalive());
    this.pingTimer = setTimeout(() => {
      keepalive();
      this.pingTimer = setInterval(keepalive, period);
      this.pingTimer.unref();
    }, Math.random() * period);
    this.pingTimer.unref();
  }

  private keepalive(): void {
    const pongTimeout = this.options.pongTimeoutMs ?? PONG_TIMEOUT_MS;
    if (
      this.awaitingPongSince !== undefined &&
      Date.now() - this.awaitingPongSince >= pongTimeout
    ) {
      this.terminate({ reason: 'network', detail: `no pong within ${pongTimeout} ms` });
      return;
    }
    if (this.awaitingPongSince === undefined) this.awaitingPongSince = Date.now();
    this.ws.ping();
  }

  private onSocketError(error: Error & { code?: string }): void {
    if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
      this.setCloseCause({ reason: 'protocol', detail: 'frame too large' });
      this.options.onFrameTooLarge();
      return;
    }
    this.setCloseCause({ reason: 'network', detail: error.message });
    this.options.onSocketError(error);
  }

  private onClose(code: number, reasonText: string): void {
    this.closed = true;
    clearInterval(this.pingTimer);
    const cause = this.cause ?? causeOfClose(code, reasonText);
    this.options.onClose({ cause, code, reasonText });
  }
}

/** The cause of a close nothing on our side explains: the close frame's own. */
function causeOfClose(code: number, reasonText: string): CloseCause {
  if (SESSION_LIMIT_TEXT.test(reasonText)) return { reason: 'session_limit' };
  if (code === 1006) return { reason: 'network' };
  return { reason: 'server_closed' };
}
