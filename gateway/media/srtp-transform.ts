/**
 * SRTP and SRTCP for one call (RFC 3711, keyed by SDES): what callgate sends is protected with
 * its own key, what arrives is authenticated and decrypted with the far end's, in place, by
 * libsrtp (srtp-binding.ts), which keeps the rollover counter and the replay window. A packet that
 * fails is a typed drop reason, never audio (test/integration/media/rtp-session-srtp.test.ts).
 *
 * A re-INVITE with new keys (`rekey`) replaces only the direction whose key changed: an unchanged
 * key keeps its context, so its rollover counter and replay window go on. The far end's previous
 * key stays usable until a packet authenticates with the new one, as packets sent before the far
 * end saw our answer may still be on the way. A far end's key with an MKI has it cut out of each
 * packet before libsrtp checks it (srtp-mki.ts); a packet with another MKI names no key callgate
 * has, and is dropped as unkeyed, as is a packet past the lifetime the far end gave its key.
 */
import { loadSrtpBinding, SRTP_STATUS, type SrtpBinding, type SrtpHandle } from './srtp-binding.ts';
import { stripMki } from './srtp-mki.ts';

export type SrtpSuiteName =
  'AES_CM_128_HMAC_SHA1_80' | 'AES_CM_128_HMAC_SHA1_32' | 'AEAD_AES_128_GCM';

/** The SRTP suite and keys of a call (the SDP negotiation's NegotiatedSrtp). */
export interface SrtpKeys {
  readonly suite: SrtpSuiteName;
  /** Master key and salt that protect what callgate sends. */
  readonly localKey: Uint8Array;
  /** Master key and salt of the far end; absent until its answer names it (delayed offer). */
  readonly remoteKey?: Uint8Array;
  /** The MKI the far end's packets carry with `remoteKey`, when its crypto line names one. */
  readonly remoteMki?: Uint8Array;
  /**
   * Packets `remoteKey` may protect, SRTP and SRTCP together (RFC 4568 section 6.1); once they are
   * used up, what still comes with it is dropped as unkeyed until a re-INVITE brings a new key.
   */
  readonly remoteLifetime?: number;
}

/** Why a received packet was not used: a bad tag, a replayed or too old index, no key yet. */
export type SrtpDropReason = 'srtp-auth' | 'srtp-replay' | 'srtp-unkeyed' | 'srtp-error';

const SUITE_IDS: Readonly<Record<SrtpSuiteName, number>> = {
  AES_CM_128_HMAC_SHA1_80: 0,
  AES_CM_128_HMAC_SHA1_32: 1,
  AEAD_AES_128_GCM: 2,
};

function dropReasonOf(status: number): SrtpDropReason {
  if (status === SRTP_STATUS.authFail) return 'srtp-auth';
  if (status === SRTP_STATUS.replayFail || status === SRTP_STATUS.replayOld) return 'srtp-replay';
  return 'srtp-error';
}

function sameKey(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  return a !== undefined && b !== undefined && Buffer.compare(a, b) === 0;
}

function sameMki(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  return a === undefined ? b === undefined : sameKey(a, b);
}

/** Whether SRTP can run in this process, or why not. */
export function srtpUnavailableReason(): string | undefined {
  const binding = loadSrtpBinding();
  return binding instanceof Error ? binding.message : undefined;
}

interface Inbound {
  readonly key: Uint8Array;
  readonly mki: Uint8Array | undefined;
  readonly handle: SrtpHandle;
  /** Packets the key may still authenticate. */
  remaining: number;
}

export class SrtpTransform {
  /** Room a packet buffer needs after an RTP packet for its tag. */
  readonly trailerBytes: number;
  private readonly binding: SrtpBinding;
  private suite: SrtpSuiteName;
  private localKey: Uint8Array;
  private outbound: SrtpHandle;
  private inbound: Inbound | undefined;
  private previousInbound: Inbound | undefined;

  /** Throws when libsrtp is not available (srtpUnavailableReason says why) or refuses the keys. */
  constructor(keys: SrtpKeys, binding: SrtpBinding | Error = loadSrtpBinding()) {
    if (binding instanceof Error) throw binding;
    this.binding = binding;
    this.trailerBytes = binding.TRAILER_BYTES;
    this.suite = keys.suite;
    this.localKey = keys.localKey;
    this.outbound = this.context(keys.localKey, true);
    this.inbound = keys.remoteKey === undefined ? undefined : this.inboundFor(keys.remoteKey, keys);
  }

  /** New keys from a re-INVITE or the delayed offer's answer; unchanged directions go on as they were. */
  rekey(keys: SrtpKeys): void {
    const suiteChanged = keys.suite !== this.suite;
    this.suite = keys.suite;
    if (suiteChanged || !sameKey(keys.localKey, this.localKey)) {
      const old = this.outbound;
      this.outbound = this.context(keys.localKey, true);
      this.localKey = keys.localKey;
      this.binding.dispose(old);
    }
    if (keys.remoteKey === undefined) return;
    if (
      !suiteChanged &&
      sameKey(keys.remoteKey, this.inbound?.key) &&
      sameMki(keys.remoteMki, this.inbound?.mki)
    )
      return;
    if (this.previousInbound !== undefined) this.binding.dispose(this.previousInbound.handle);
    this.previousInbound = suiteChanged ? undefined : this.inbound;
    if (suiteChanged && this.inbound !== undefined) this.binding.dispose(this.inbound.handle);
    this.inbound = this.inboundFor(keys.remoteKey, keys);
  }

  /**
   * Protects the RTP packet of `length` bytes at the start of `buffer` (which has `trailerBytes`
   * more); the protected length, or 0 when libsrtp refused (the packet is not sent).
   */
  protectRtp(buffer: Buffer, length: number): number {
    const protectedLength = this.binding.protect(this.outbound, buffer, length);
    return protectedLength > 0 ? protectedLength : 0;
  }

  /** The plain packet (a view of `packet`, decrypted in place), or why it is dropped. */
  unprotectRtp(packet: Buffer): Buffer | SrtpDropReason {
    return this.unprotectWith(packet, 'rtp', (handle, data) =>
      this.binding.unprotect(handle, data),
    );
  }

  /** A protected copy of an RTCP packet, or undefined when libsrtp refused it. */
  protectRtcp(packet: Buffer): Buffer | undefined {
    const buffer = Buffer.allocUnsafe(packet.length + this.binding.RTCP_TRAILER_BYTES);
    buffer.set(packet);
    const length = this.binding.protectRtcp(this.outbound, buffer, packet.length);
    return length > 0 ? buffer.subarray(0, length) : undefined;
  }

  unprotectRtcp(packet: Buffer): Buffer | SrtpDropReason {
    return this.unprotectWith(packet, 'rtcp', (handle, data) =>
      this.binding.unprotectRtcp(handle, data),
    );
  }

  /** Frees the contexts now (hang-up); nothing may be protected afterwards. */
  dispose(): void {
    this.binding.dispose(this.outbound);
    if (this.inbound !== undefined) this.binding.dispose(this.inbound.handle);
    if (this.previousInbound !== undefined) this.binding.dispose(this.previousInbound.handle);
    this.inbound = undefined;
    this.previousInbound = undefined;
  }

  private unprotectWith(
    packet: Buffer,
    kind: 'rtp' | 'rtcp',
    unprotect: (handle: SrtpHandle, data: Buffer) => number,
  ): Buffer | SrtpDropReason {
    const inbound = this.inbound;
    if (inbound === undefined || inbound.remaining <= 0) return 'srtp-unkeyed';
    const previous = this.previousInbound;
    // A failed AEAD check may leave the bytes changed: the previous key gets the packet as it came.
    const original = previous === undefined ? undefined : Buffer.from(packet);
    const current = this.withoutMki(packet, inbound, kind);
    const length =
      current === undefined ? -SRTP_STATUS.authFail : unprotect(inbound.handle, current);
    if (current !== undefined && length >= 0) {
      inbound.remaining--;
      if (previous !== undefined) {
        this.binding.dispose(previous.handle);
        this.previousInbound = undefined;
      }
      return current.subarray(0, length);
    }
    if (previous === undefined || original === undefined || -length !== SRTP_STATUS.authFail)
      return current === undefined ? 'srtp-unkeyed' : dropReasonOf(-length);
    const older = previous.remaining > 0 ? this.withoutMki(original, previous, kind) : undefined;
    if (older === undefined) return current === undefined ? 'srtp-unkeyed' : 'srtp-auth';
    const oldLength = unprotect(previous.handle, older);
    if (oldLength < 0) return dropReasonOf(-oldLength);
    previous.remaining--;
    return older.subarray(0, oldLength);
  }

  /** The packet as libsrtp takes it for `key`: its MKI cut out, or undefined when it names another. */
  private withoutMki(packet: Buffer, key: Inbound, kind: 'rtp' | 'rtcp'): Buffer | undefined {
    return key.mki === undefined ? packet : stripMki(packet, key.mki, this.suite, kind);
  }

  private inboundFor(key: Uint8Array, keys: SrtpKeys): Inbound {
    return {
      key,
      mki: keys.remoteMki,
      handle: this.context(key, false),
      remaining: keys.remoteLifetime ?? Number.POSITIVE_INFINITY,
    };
  }

  private context(key: Uint8Array, outbound: boolean): SrtpHandle {
    return this.binding.create(SUITE_IDS[this.suite], Buffer.from(key), outbound);
  }
}
