/**
 * The driver's connection to drachtio-server: connect, authenticate, reconnect with back-off, and
 * say whether calls can be carried (the `sip` readiness check). srf reports a refused secret as a
 * `connect` event with an error and a lost connection as `close`; its own retry loop (which
 * restarts at 150 ms on every TCP connect, also after a refused secret) is turned off so that
 * `sip.drachtio.reconnectMs` governs every retry (test/e2e/drachtio-connection.test.ts).
 */
import type Srf from 'drachtio-srf';
import type { Logger } from '../../../config/log.ts';
import type { SipConfig } from '../../../config/schema.ts';
import type { DriverReadiness } from '../signaling-driver.ts';
import { drachtioConnection, reconnectDelay } from './drachtio-mapping.ts';

/** Where the connection is; only `connected` carries calls. */
export type DrachtioConnectionPhase =
  | 'idle'
  | 'connecting'
  | 'connected'
  /** drachtio-server answered the authentication with a refusal (a wrong shared secret). */
  | 'refused'
  /** The TCP connection failed or was lost; a retry is scheduled. */
  | 'down'
  | 'stopped';

/** What the connection uses of srf beyond its published types. */
export interface SrfConnectionPort {
  connect(
    config: Srf.SrfConfig & { readonly reconnect?: { readonly maxAttempts: number } },
  ): unknown;
  disconnect(): void;
  on(event: 'connect', listener: (error: Error | null, hostPort?: string) => void): unknown;
  on(event: 'close' | 'error', listener: (error?: Error) => void): unknown;
}

export interface DrachtioConnectionOptions {
  readonly sip: SipConfig;
  readonly srf: SrfConnectionPort;
  readonly logger: Logger;
  readonly readSecret: (name: string) => string | undefined;
}

/** srf's own retry gives up at once: `attempts` starts at 1, and 1 >= maxAttempts. */
const NO_SRF_RETRY = { maxAttempts: 1 } as const;

export class DrachtioConnection {
  private current: DrachtioConnectionPhase = 'idle';
  private attempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private waiters: (() => void)[] = [];
  private readonly address: string;

  constructor(private readonly options: DrachtioConnectionOptions) {
    const { host, port } = options.sip.drachtio;
    this.address = `${host}:${port}`;
  }

  get phase(): DrachtioConnectionPhase {
    return this.current;
  }

  /**
   * Starts connecting; resolves once the first attempt is under way, not when it succeeded.
   * @throws CallgateError CALLGATE_ERR_SIP_DRACHTIO_CONNECTION when the secret variable is unset.
   */
  start(): void {
    const settings = drachtioConnection(this.options.sip, this.options.readSecret);
    const { srf } = this.options;
    srf.on('connect', (error, hostPort) => this.handleConnect(error, hostPort));
    srf.on('error', (error) => this.handleError(error));
    srf.on('close', () => this.handleClose());
    this.options.logger.info('connecting to drachtio-server', { address: this.address });
    this.current = 'connecting';
    srf.connect({ ...settings, reconnect: NO_SRF_RETRY });
  }

  readiness(): DriverReadiness {
    switch (this.current) {
      case 'connected':
        return { ready: true };
      case 'refused':
        return {
          ready: false,
          reason: `drachtio-server at ${this.address} refused the shared secret`,
        };
      case 'stopped':
        return { ready: false, reason: 'stopped' };
      default:
        return { ready: false, reason: `not connected to drachtio-server at ${this.address}` };
    }
  }

  /** Resolves the next time the connection is authenticated (at once when it is). */
  whenReady(): Promise<void> {
    if (this.current === 'connected') return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Ends the connection and every retry; safe in any phase, connected or not. */
  stop(): void {
    const wasConnected = this.current === 'connected';
    this.current = 'stopped';
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    if (wasConnected) this.disconnectSrf();
  }

  private handleConnect(error: Error | null, hostPort: string | undefined): void {
    if (this.current === 'stopped') {
      // An attempt that was under way when stop() ran: it is closed, not used.
      if (error === null) this.disconnectSrf();
      return;
    }
    if (error !== null) {
      this.current = 'refused';
      this.options.logger.error(
        'drachtio-server refused the shared secret; calls cannot be taken',
        {
          address: this.address,
          secretEnv: this.options.sip.drachtio.secretEnv,
          reason: error.message,
        },
      );
      // drachtio-server closes the connection itself; closing it here too covers one that does not.
      this.disconnectSrf();
      return;
    }
    this.current = 'connected';
    this.attempt = 0;
    this.options.logger.info('connected to drachtio-server', { address: this.address, hostPort });
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private handleError(error: Error | undefined): void {
    if (this.current === 'stopped') return;
    this.options.logger.warn('drachtio-server connection error', {
      address: this.address,
      reason: error?.message,
    });
  }

  private handleClose(): void {
    if (this.current === 'stopped') return;
    if (this.current !== 'refused') this.current = 'down';
    this.scheduleReconnect();
  }

  /** Retries with a doubling delay from reconnectMs (drachtio-mapping.ts), until stop(). */
  private scheduleReconnect(): void {
    if (this.reconnectTimer !== undefined) return;
    const delayMs = reconnectDelay(this.attempt, this.options.sip.drachtio.reconnectMs);
    this.attempt += 1;
    const log = this.current === 'refused' ? 'error' : 'warn';
    this.options.logger[log]('drachtio-server not connected, retrying', {
      address: this.address,
      delayMs,
      attempt: this.attempt,
    });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.current === 'stopped') return;
      if (this.current !== 'refused') this.current = 'connecting';
      this.options.srf.connect({
        ...drachtioConnection(this.options.sip, this.options.readSecret),
        reconnect: NO_SRF_RETRY,
      });
    }, delayMs);
    this.reconnectTimer.unref();
  }

  /** srf throws an AssertionError when it has no socket to close: nothing to close then. */
  private disconnectSrf(): void {
    try {
      this.options.srf.disconnect();
    } catch {
      // No socket: already closed.
    }
  }
}
