/**
 * Which addresses may send a call's media: those its signaling and SDP name, and the tenant's
 * media ranges. Latching (rtp-source-latch.ts) never latches nor follows anything else, so a
 * stranger who reaches the call's RTP port cannot take its audio ("RTP bleed",
 * test/unit/media/media-source-policy.test.ts, test/scenarios/rtp-bleed.test.ts). Pure: no
 * sockets, no name resolution.
 *
 * Addresses, not ports: a caller behind NAT may send from another port than its SDP names, and
 * the NAT may rebind it during the call; the latch's silence rule decides when to follow a port.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

export interface MediaSourcePolicyOptions {
  /** Where the INVITE came from: a phone behind NAT sends its media from this address too. */
  readonly signaling?: string;
  /** The tenant's media ranges (`tenants[].media.allowFrom`, CIDR): carriers whose media comes from other hosts. */
  readonly allowFrom?: readonly string[];
  /**
   * The SDP's connection addresses of the call's audio stream (the m= line's c=, else the
   * session's). A host name names nothing: the media path resolves no names.
   */
  readonly sdp?: readonly string[];
}

type Family = 'ipv4' | 'ipv6';

const MAPPED_IPV4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** The family of an address as text, or undefined for anything else (a host name). */
function familyOf(address: string): Family | undefined {
  if (isIPv4(address)) return 'ipv4';
  if (isIPv6(address)) return 'ipv6';
  return undefined;
}

/** An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 peer) as plain IPv4. */
function unmapped(address: string): string {
  const mapped = MAPPED_IPV4.exec(address);
  return mapped?.[1] ?? address;
}

/** The RFC 2543 hold address and its IPv6 twin: they name no sender. */
function isNullAddress(address: string): boolean {
  return address === '0.0.0.0' || address === '::';
}

export class MediaSourcePolicy {
  private readonly ranges: BlockList | undefined;
  private readonly signaling: string | undefined;
  /** Where the latest re-INVITE came from, when that is not the INVITE's source. */
  private reinviteSignaling: string | undefined;
  /** Addresses named by signaling and SDP, as written (plus their unmapped IPv4 form). */
  private named = new Set<string>();
  /** The same, for matches a string compare misses (IPv6 written in another form). */
  private namedList = new BlockList();
  private sdp: readonly string[] = [];

  constructor(options: MediaSourcePolicyOptions = {}) {
    const ranges = options.allowFrom ?? [];
    if (ranges.length > 0) {
      const list = new BlockList();
      for (const range of ranges) addRange(list, range);
      this.ranges = list;
    }
    this.signaling = options.signaling === undefined ? undefined : unmapped(options.signaling);
    this.rebuild(options.sdp ?? []);
  }

  /**
   * The SDP of an answer or re-INVITE named these addresses: they replace the SDP's earlier ones
   * (the signaling source and the ranges stay). An SDP naming only the hold address (c=0.0.0.0)
   * or none at all keeps the earlier ones: the caller holds from where it was, and resumes from
   * there (test/unit/media/media-source-policy.test.ts).
   */
  nameSdp(addresses: readonly string[]): void {
    if (!addresses.some((address) => !isNullAddress(address))) return;
    this.rebuild(addresses);
  }

  /**
   * A re-INVITE came from `address`: it is named beside the INVITE's source (which stays), in place
   * of an earlier re-INVITE's. A host name names nothing
   * (test/integration/media/rtp-source-reinvite.test.ts).
   */
  nameSignaling(address: string): void {
    const plain = unmapped(address);
    if (familyOf(plain) === undefined || isNullAddress(plain)) return;
    this.reinviteSignaling = plain === this.signaling ? undefined : plain;
    this.rebuild(this.sdp);
  }

  /** Whether a packet from `address` may latch the call's media (or be followed later). */
  admits(address: string): boolean {
    if (this.named.has(address)) return true;
    const plain = unmapped(address);
    const family = familyOf(plain);
    if (family === undefined) return false;
    if (plain !== address && this.named.has(plain)) return true;
    return this.namedList.check(plain, family) || (this.ranges?.check(plain, family) ?? false);
  }

  /** What is named now, for logs: the signaling sources (INVITE, latest re-INVITE) and the SDP's addresses. */
  describe(): {
    readonly signaling: string | undefined;
    readonly reinvite?: string;
    readonly sdp: readonly string[];
  } {
    return {
      signaling: this.signaling,
      ...(this.reinviteSignaling !== undefined && { reinvite: this.reinviteSignaling }),
      sdp: this.sdp,
    };
  }

  /**
   * A private c= (a phone behind NAT writes its LAN address) and a public signaling source both
   * stay named: the phone's media then comes from the signaling address, which is named, and a
   * carrier on a private interconnect really sends from its private c=. The hold address names
   * nothing (test/unit/media/media-source-policy.test.ts).
   */
  private rebuild(sdp: readonly string[]): void {
    this.sdp = sdp.filter((address) => !isNullAddress(address));
    const named = new Set<string>();
    const list = new BlockList();
    for (const address of [
      ...this.sdp,
      ...(this.signaling === undefined ? [] : [this.signaling]),
      ...(this.reinviteSignaling === undefined ? [] : [this.reinviteSignaling]),
    ]) {
      const plain = unmapped(address);
      const family = familyOf(plain);
      if (family === undefined) continue;
      named.add(address);
      named.add(plain);
      list.addAddress(plain, family);
    }
    this.named = named;
    this.namedList = list;
  }
}

/** Adds a CIDR block or a single address (config/schema.ts validated the text). */
function addRange(list: BlockList, range: string): void {
  const [address = '', bits] = range.split('/');
  const family = familyOf(address);
  if (family === undefined) return;
  if (bits === undefined) list.addAddress(address, family);
  else list.addSubnet(address, Number(bits), family);
}
