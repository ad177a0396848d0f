/**
 * The session configuration of an OpenAIRealtimeSession: the server's current word on it (from
 * session.created and every session.updated), and the configure() calls waiting for their
 * session.updated (test/integration/realtime/session-updated-matching.test.ts).
 */
import { CallgateError } from '../../config/errors.ts';
import type { SessionWire } from './openai-protocol.ts';
import type { AudioFormat } from './realtime-session.ts';
import { formatFromWire, serverInterruptsResponses } from './session-config-wire.ts';

/** session.updated normally follows in tens of ms; a server silent this long is broken. */
export const SESSION_UPDATE_TIMEOUT_MS = 5_000;

interface Waiter {
  eventId?: string;
  /** The instructions a session.update sent: its session.updated echoes them. */
  instructions?: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

export interface SessionUpdatesOptions {
  timeoutMs?: number;
  /** The server's configuration has no turn detection: no speech_stopped will come. */
  onNoTurnDetection: () => void;
  /** A configure() timed out (reported before its promise rejects). */
  onTimeout: (error: CallgateError) => void;
}

export class SessionUpdates {
  private session: SessionWire | undefined;
  private input: AudioFormat = 'pcmu';
  private output: AudioFormat = 'pcmu';
  private readonly waiters: Waiter[] = [];

  constructor(private readonly options: SessionUpdatesOptions) {}

  get inputFormat(): AudioFormat {
    return this.input;
  }

  get outputFormat(): AudioFormat {
    return this.output;
  }

  /** Whether the server cancels its own response when the caller starts speaking. */
  get serverInterruptsResponses(): boolean {
    return this.session !== undefined && serverInterruptsResponses(this.session);
  }

  /** Takes the server's configuration as current (session.created, or any session.updated). */
  apply(session: SessionWire): void {
    this.session = session;
    // Without turn detection no speech_stopped will come: do not keep holding responses for one.
    if (session.audio?.input?.turn_detection === null) this.options.onNoTurnDetection();
    this.input = formatFromWire(session.audio?.input?.format) ?? this.input;
    this.output = formatFromWire(session.audio?.output?.format) ?? this.output;
  }

  /** Waits for the session.updated that answers the session.update sent as `eventId`; bounded. */
  awaitUpdated(eventId: string | undefined, instructions: string | undefined): Promise<void> {
    const timeoutMs = this.options.timeoutMs ?? SESSION_UPDATE_TIMEOUT_MS;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        ...(eventId !== undefined && { eventId }),
        ...(instructions !== undefined && { instructions }),
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        this.remove(waiter);
        const error = new CallgateError('CALLGATE_ERR_MODEL_TIMEOUT', {
          what: 'session.update',
          timeoutMs,
        });
        this.options.onTimeout(error);
        reject(error);
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /**
   * The protocol does not echo a session.update's event_id on its session.updated, but the
   * effective configuration it carries includes the instructions that update sent: the update
   * answered is the oldest waiting one with those instructions (the oldest of all when the server
   * leaves them out). Returns false when it answers no waiting configure() (it is still applied).
   */
  onUpdated(session: SessionWire): boolean {
    // Whatever it answers, it is the server's word on its current configuration.
    this.apply(session);
    const echoed = session.instructions;
    const waiter = this.waiters.find(
      (w) => echoed === undefined || w.instructions === undefined || w.instructions === echoed,
    );
    if (waiter === undefined) return false;
    this.remove(waiter);
    waiter.resolve();
    return true;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** The server refused the session.update sent as `eventId`: its configure() rejects. */
  refused(eventId: string | null, error: Error): void {
    const waiter = this.waiters.find((w) => w.eventId !== undefined && w.eventId === eventId);
    if (waiter === undefined) return;
    this.remove(waiter);
    waiter.reject(error);
  }

  /** The session is over: every configure() still waiting rejects. */
  rejectAll(error: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }

  private remove(waiter: Waiter): void {
    const index = this.waiters.indexOf(waiter);
    if (index >= 0) this.waiters.splice(index, 1);
  }
}
