/**
 * Symmetric RTP latching for one RtpSession: which source (address, port, SSRC) the caller's
 * stream is, and when another one is followed. Only addresses the call's MediaSourcePolicy admits
 * are ever latched or followed (media-source-policy.ts). Pure: no sockets, no timers; the session
 * hands it each packet with the time and acts on the decision
 * (test/unit/media/rtp-source-latch.test.ts, test/integration/media/rtp-session-latching.test.ts).
 */
import type { RemoteInfo } from 'node:dgram';
import { MediaSourcePolicy } from './media-source-policy.ts';
import type { RtpPacket } from './rtp-packet.ts';

/**
 * Consecutive, in-sequence packets another source (a new SSRC, or the latched SSRC from another
 * address) must send before the session follows it; fewer, and one stray packet would reset the
 * stream. They are held, not lost: once the source is followed they play.
 */
const SSRC_CHANGE_PROBATION = 3;
/**
 * Symmetric RTP follows another source only after the latched one has sent nothing for this long
 * (a NAT rebinding, a carrier switching media servers without a re-INVITE). While the latched
 * source is live, nothing else is followed, whatever its SSRC: someone who sees or guesses the
 * SSRC cannot redirect the stream, and two senders cannot make it flip back and forth. The price
 * is at most this much caller audio lost at a genuine move. Well above a 20 ms packet interval
 * and a few packets of jitter; well below rtp.mediaTimeoutMs (at least 1 s, 30 s by default).
 */
export const RELATCH_AFTER_SILENCE_MS = 1000;

/**
 * Refused sources a call logs by name; past this many, a sprayer of the port range costs no more
 * log lines (each refused packet is still counted).
 */
const MAX_LOGGED_REFUSED_SOURCES = 16;

export interface LatchedSource {
  readonly address: string;
  readonly port: number;
  readonly ssrc: number;
}

/** Another source on probation: the packets it sent in sequence so far, held until it is followed. */
interface CandidateSource extends LatchedSource {
  lastSequence: number;
  readonly held: RtpPacket[];
}

/** What the session does with a packet that is not from the latched source. */
export type LatchDecision =
  /** The first source since the session (or setRemote) started: it is latched; `previousSsrc` is the SSRC latched before a restart, if any. */
  | { readonly kind: 'latched'; readonly previousSsrc: number | undefined }
  /** Not followed (yet): counted as dropped for `reason`. */
  | { readonly kind: 'drop'; readonly reason: 'ssrc-probation' | 'unexpected-source' }
  /**
   * From an address the call did not name: dropped, never latched nor followed. `log` is true the
   * first time this source (address and port) is refused in the call, up to MAX_LOGGED_REFUSED_SOURCES.
   */
  | { readonly kind: 'refused'; readonly log: boolean }
  /**
   * A telephone-event packet with an SSRC of its own from the latched address and port: the
   * caller's phone sends its digits as a separate stream. Used at once, without probation, and
   * the audio stream stays latched.
   */
  | { readonly kind: 'side-event' }
  /**
   * Another source was followed after its probation: `held` (this packet included) plays now, and
   * `heldDrops` of them had been counted as dropped.
   */
  | {
      readonly kind: 'followed';
      readonly previous: LatchedSource;
      readonly moved: boolean;
      readonly held: readonly RtpPacket[];
      readonly heldDrops: number;
    };

const DROP_PROBATION: LatchDecision = { kind: 'drop', reason: 'ssrc-probation' };
const DROP_UNEXPECTED: LatchDecision = { kind: 'drop', reason: 'unexpected-source' };
const REFUSED_LOGGED: LatchDecision = { kind: 'refused', log: true };
const REFUSED_QUIET: LatchDecision = { kind: 'refused', log: false };
const SIDE_EVENT: LatchDecision = { kind: 'side-event' };

/**
 * A packet held past its datagram's handler (a new source on probation, possibly for the rest of
 * the call) with a payload of its own: a received datagram may be a view into a whole batch of
 * the native sockets' datagrams (up to 64 KB), which a kept view would keep alive.
 */
function keptPacket(packet: RtpPacket): RtpPacket {
  const extension =
    packet.extension === undefined
      ? undefined
      : { profile: packet.extension.profile, data: Buffer.from(packet.extension.data) };
  return {
    ...packet,
    payload: Buffer.from(packet.payload),
    ...(extension !== undefined && { extension }),
  };
}

export class RtpSourceLatch {
  /** Who may send the call's media; without one, nobody is named and nothing latches. */
  readonly sources: MediaSourcePolicy;
  private latched: LatchedSource | undefined;
  /** The SSRC latched before restart() started latching over, until a source is latched again. */
  private unlatchedSsrc: number | undefined;
  /** When the latched source last sent a packet we accepted. */
  private latchedHeardAt = 0;
  private candidate: CandidateSource | undefined;
  /** Refused sources already logged (address and port), bounded by MAX_LOGGED_REFUSED_SOURCES. */
  private readonly refusedLogged = new Set<string>();

  constructor(sources: MediaSourcePolicy = new MediaSourcePolicy()) {
    this.sources = sources;
  }

  /** The latched source's SSRC, once one is latched. */
  get ssrc(): number | undefined {
    return this.latched?.ssrc;
  }

  get isLatched(): boolean {
    return this.latched !== undefined;
  }

  /** The hot path: true (and the source is heard) when the packet is from the latched source. */
  fromLatched(packet: RtpPacket, from: RemoteInfo, now: number): boolean {
    const latched = this.latched;
    if (
      latched === undefined ||
      packet.ssrc !== latched.ssrc ||
      from.port !== latched.port ||
      from.address !== latched.address
    )
      return false;
    this.latchedHeardAt = now;
    this.candidate = undefined;
    return true;
  }

  /**
   * Symmetric RTP, for every packet not from the latched source. A source whose address the
   * call's MediaSourcePolicy does not admit is refused, whatever else holds. The first admitted
   * packet of the call latches its address, port and SSRC. After that another admitted source (a
   * new SSRC, or the same SSRC from another port or named address) is followed only once the
   * latched source has been silent for RELATCH_AFTER_SILENCE_MS and the new one has sent
   * SSRC_CHANGE_PROBATION packets in sequence; until then its packets are dropped (counted), and
   * the held probation packets play once it is followed. See RELATCH_AFTER_SILENCE_MS for why.
   * `telephoneEvent`: the packet's payload type is the call's telephone-event (see 'side-event').
   */
  admitOther(
    packet: RtpPacket,
    from: RemoteInfo,
    now: number,
    telephoneEvent = false,
  ): LatchDecision {
    const latched = this.latched;
    if (
      telephoneEvent &&
      latched !== undefined &&
      from.port === latched.port &&
      from.address === latched.address
    )
      return SIDE_EVENT;
    if (!this.sources.admits(from.address)) return this.refuse(from);
    if (latched === undefined) {
      this.latched = { address: from.address, port: from.port, ssrc: packet.ssrc };
      this.latchedHeardAt = now;
      // After a re-INVITE the stream may start over with a new SSRC and its own sequence numbers.
      const previousSsrc = this.unlatchedSsrc;
      this.unlatchedSsrc = undefined;
      return { kind: 'latched', previousSsrc };
    }
    const fromLatchedAddress = from.address === latched.address && from.port === latched.port;
    if (now - this.latchedHeardAt < RELATCH_AFTER_SILENCE_MS) {
      // The latched source is live: nothing else is followed, and no probation builds up meanwhile.
      this.candidate = undefined;
      return fromLatchedAddress ? DROP_PROBATION : DROP_UNEXPECTED;
    }
    let candidate = this.candidate;
    const sameCandidate =
      candidate !== undefined &&
      candidate.ssrc === packet.ssrc &&
      candidate.port === from.port &&
      candidate.address === from.address;
    if (candidate !== undefined && sameCandidate) {
      const step = (packet.sequenceNumber - candidate.lastSequence) & 0xffff;
      if (step === 0) {
        // A repeated packet (RFC 4733 end packets repeat their sequence number): keep, do not count.
        if (candidate.held.length < SSRC_CHANGE_PROBATION * 2)
          candidate.held.push(keptPacket(packet));
        return DROP_PROBATION;
      }
      if (step !== 1) candidate = undefined;
    } else {
      candidate = undefined;
    }
    if (candidate === undefined) {
      candidate = {
        address: from.address,
        port: from.port,
        ssrc: packet.ssrc,
        lastSequence: packet.sequenceNumber,
        held: [keptPacket(packet)],
      };
      this.candidate = candidate;
    } else {
      candidate.lastSequence = packet.sequenceNumber;
      candidate.held.push(keptPacket(packet));
    }
    let inSequence = 0;
    let previousSequence = -1;
    for (const held of candidate.held) {
      if (held.sequenceNumber !== previousSequence) inSequence++;
      previousSequence = held.sequenceNumber;
    }
    if (inSequence < SSRC_CHANGE_PROBATION) return DROP_PROBATION;
    // Followed: the new source is the latched one from here on; the old one is a stranger now.
    this.candidate = undefined;
    this.latched = { address: from.address, port: from.port, ssrc: packet.ssrc };
    this.latchedHeardAt = now;
    // Every held packet but this one was counted as dropped when it arrived.
    return {
      kind: 'followed',
      previous: latched,
      moved: !fromLatchedAddress,
      held: candidate.held,
      heldDrops: candidate.held.length - 1,
    };
  }

  /**
   * The far end's SDP address changed (answer, re-INVITE): it is named from now on
   * (MediaSourcePolicy.nameSdp), and latching starts over, remembering the SSRC.
   */
  restart(sdpAddress?: string): void {
    if (sdpAddress !== undefined) this.sources.nameSdp([sdpAddress]);
    this.unlatchedSsrc = this.latched?.ssrc ?? this.unlatchedSsrc;
    this.latched = undefined;
    this.candidate = undefined;
  }

  private refuse(from: RemoteInfo): LatchDecision {
    if (this.refusedLogged.size >= MAX_LOGGED_REFUSED_SOURCES) return REFUSED_QUIET;
    const key = `${from.address}|${from.port}`;
    if (this.refusedLogged.has(key)) return REFUSED_QUIET;
    this.refusedLogged.add(key);
    return REFUSED_LOGGED;
  }

  /** The codec changed: the caller may restart its stream too, so the next source latches afresh. */
  forget(): void {
    this.latched = undefined;
    this.candidate = undefined;
  }
}
