/**
 * One RtpSession on loopback with a test peer, for the integration tests that drive a session
 * over real UDP. Each test file gets a port range of its own (per process and per file) so two
 * files running at once do not bind the same ports.
 */
import type { RtpConfig } from '../../../config/schema.ts';
import { Logger } from '../../../config/log.ts';
import { PCMU } from '../../../gateway/media/audio-format.ts';
import { MonotonicMediaTimer } from '../../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { RtpSession, type RtpSessionOptions } from '../../../gateway/media/rtp-session.ts';
import type { RtpSessionEvent } from '../../../gateway/media/rtp-session-events.ts';
import { RtpPeer, sleep } from './rtp-peer.ts';

export const TELEPHONE_EVENT = 101;
const quietLogger = new Logger({ level: 'error', sink: { write: () => {} } });

export interface SessionHarness {
  readonly session: RtpSession;
  readonly peer: RtpPeer;
  readonly events: RtpSessionEvent[];
}

export class RtpSessionHarness {
  private readonly timer = new MonotonicMediaTimer();
  private scheduler = new PlayoutScheduler({ timer: this.timer });
  private readonly portMin: number;
  private ports: RtpPortAllocator;
  private readonly open: Array<{ close(): Promise<void> }> = [];

  /** `slot`: which of the test files using the harness this is (0-9), so their ranges differ. */
  constructor(slot: number) {
    this.portMin = 30000 + 2 * ((process.pid * 41 + slot * 997) % 4000);
    this.ports = new RtpPortAllocator({ portMin: this.portMin, portMax: this.portMin + 39 });
  }

  config(overrides: Partial<RtpConfig> = {}): RtpConfig {
    return {
      listen: '127.0.0.1',
      portMin: this.portMin,
      portMax: this.portMin + 39,
      mediaTimeoutMs: 5000,
      comfortSilence: false,
      stallCutMs: 2000,
      jitterMinMs: 20,
      jitterMaxMs: 200,
      sockets: 'auto',
      ...overrides,
    };
  }

  async start(
    options: Partial<RtpSessionOptions> = {},
    rtp: Partial<RtpConfig> = {},
  ): Promise<SessionHarness> {
    const peer = await this.peer();
    const session = await RtpSession.open({
      config: this.config(rtp),
      ports: this.ports,
      scheduler: this.scheduler,
      timer: this.timer,
      codec: PCMU,
      telephoneEventPayloadType: TELEPHONE_EVENT,
      model: { encoding: 'pcmu' },
      remote: { address: '127.0.0.1', port: peer.port },
      logger: quietLogger,
      ...options,
    });
    this.open.push(session);
    const events: RtpSessionEvent[] = [];
    session.on((event) => events.push(event));
    return { session, peer, events };
  }

  async peer(address?: string): Promise<RtpPeer> {
    const peer = await RtpPeer.open(0, address);
    this.open.push(peer);
    return peer;
  }

  async closeAll(): Promise<void> {
    for (const item of this.open.splice(0)) await item.close();
    this.scheduler = new PlayoutScheduler({ timer: this.timer });
    this.ports = new RtpPortAllocator({ portMin: this.portMin, portMax: this.portMin + 39 });
  }
}

export function audioPayload(n: number, bytes = 160): Buffer {
  return Buffer.alloc(bytes, n & 0xff);
}

/** Caller audio the model got (concealment left out). */
export function audioEvents(events: readonly RtpSessionEvent[]): Buffer[] {
  return events.flatMap((e) => (e.type === 'audio' && !e.concealed ? [e.audio] : []));
}

export interface StreamOptions {
  readonly ssrc: number;
  readonly firstSeq: number;
  /** Payload marker byte of the first packet; later ones count up from it. */
  readonly firstByte: number;
  readonly payloadType?: number;
  readonly payload?: (i: number) => Buffer;
}

/** Sends `count` packets paced at 20 ms from `peer`, as a caller's phone would. */
export async function stream(
  peer: RtpPeer,
  port: number,
  count: number,
  options: StreamOptions,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const payload = options.payload?.(i) ?? audioPayload(options.firstByte + i);
    peer.send(
      {
        payloadType: options.payloadType ?? 0,
        marker: i === 0,
        sequenceNumber: (options.firstSeq + i) & 0xffff,
        timestamp: (options.firstSeq + i) * 160,
        ssrc: options.ssrc,
        payload,
      },
      port,
    );
    await sleep(20);
  }
}
