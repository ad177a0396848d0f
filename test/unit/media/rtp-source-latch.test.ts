import type { RemoteInfo } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { MediaSourcePolicy } from '../../../gateway/media/media-source-policy.ts';
import type { RtpPacket } from '../../../gateway/media/rtp-packet.ts';
import {
  RELATCH_AFTER_SILENCE_MS,
  RtpSourceLatch,
  type LatchDecision,
} from '../../../gateway/media/rtp-source-latch.ts';

const CALLER: RemoteInfo = { address: '192.0.2.10', port: 40000, family: 'IPv4', size: 172 };
const MOVED: RemoteInfo = { address: '192.0.2.10', port: 40002, family: 'IPv4', size: 172 };
const STRANGER: RemoteInfo = { address: '198.51.100.7', port: 5004, family: 'IPv4', size: 172 };

/** A latch whose call named the caller's address (SDP) and the stranger's (a carrier's media range). */
function namedLatch(): RtpSourceLatch {
  return new RtpSourceLatch(
    new MediaSourcePolicy({ sdp: [CALLER.address], allowFrom: [`${STRANGER.address}/32`] }),
  );
}

function packet(ssrc: number, sequenceNumber: number, firstByte = 0): RtpPacket {
  const payload = Buffer.alloc(160, firstByte);
  return {
    marker: false,
    payloadType: 0,
    sequenceNumber,
    timestamp: sequenceNumber * 160,
    ssrc,
    csrcs: [],
    paddingBytes: 0,
    payload,
  };
}

/** Hands the latch a packet the way the session does: the hot path first, then the others. */
function admit(
  latch: RtpSourceLatch,
  p: RtpPacket,
  from: RemoteInfo,
  now: number,
): LatchDecision | 'from-latched' {
  return latch.fromLatched(p, from, now) ? 'from-latched' : latch.admitOther(p, from, now);
}

describe('when the first packet of a call arrives', () => {
  it('should latch its address, port and SSRC, and take its next packets on the hot path', () => {
    const latch = namedLatch();
    expect(admit(latch, packet(0xaaaa, 1), CALLER, 0)).toEqual({
      kind: 'latched',
      previousSsrc: undefined,
    });
    expect(latch.ssrc).toBe(0xaaaa);
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 20)).toBe('from-latched');
  });
});

describe('when another source sends while the latched one is live', () => {
  it('should follow nothing: a new SSRC from the latched address is on probation, another address unexpected', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    expect(admit(latch, packet(0xdddd, 2), CALLER, 10)).toEqual({
      kind: 'drop',
      reason: 'ssrc-probation',
    });
    expect(admit(latch, packet(0xaaaa, 2), MOVED, 10)).toEqual({
      kind: 'drop',
      reason: 'unexpected-source',
    });
    expect(admit(latch, packet(0xbbbb, 1), STRANGER, 20)).toEqual({
      kind: 'drop',
      reason: 'unexpected-source',
    });
    for (let seq = 2; seq < 10; seq++)
      expect(admit(latch, packet(0xbbbb, seq), STRANGER, 20 + seq)).toMatchObject({ kind: 'drop' });
    expect(latch.ssrc).toBe(0xaaaa);
  });
});

describe('when the latched source fell silent and another one sends in sequence', () => {
  it('should follow it after three packets in sequence, handing back every held packet to play', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const t = RELATCH_AFTER_SILENCE_MS;
    expect(admit(latch, packet(0xbbbb, 100, 1), MOVED, t)).toEqual({
      kind: 'drop',
      reason: 'ssrc-probation',
    });
    expect(admit(latch, packet(0xbbbb, 101, 2), MOVED, t + 20)).toEqual({
      kind: 'drop',
      reason: 'ssrc-probation',
    });
    const followed = admit(latch, packet(0xbbbb, 102, 3), MOVED, t + 40);
    expect(followed).toMatchObject({
      kind: 'followed',
      previous: { ssrc: 0xaaaa, port: CALLER.port },
      moved: true,
      heldDrops: 2,
    });
    expect(
      followed !== 'from-latched' &&
        followed.kind === 'followed' &&
        followed.held.map((p) => p.payload[0]),
    ).toEqual([1, 2, 3]);
    expect(latch.ssrc).toBe(0xbbbb);
    // The old source is a stranger now, and is live again only by a probation of its own.
    expect(admit(latch, packet(0xaaaa, 2), CALLER, t + 60)).toEqual({
      kind: 'drop',
      reason: 'unexpected-source',
    });
  });

  it('should start the probation over when a packet is out of sequence', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const t = RELATCH_AFTER_SILENCE_MS;
    admit(latch, packet(0xbbbb, 100), STRANGER, t);
    admit(latch, packet(0xbbbb, 101), STRANGER, t + 20);
    expect(admit(latch, packet(0xbbbb, 105), STRANGER, t + 40)).toMatchObject({ kind: 'drop' });
    expect(admit(latch, packet(0xbbbb, 106), STRANGER, t + 60)).toMatchObject({ kind: 'drop' });
    expect(admit(latch, packet(0xbbbb, 107), STRANGER, t + 80)).toMatchObject({
      kind: 'followed',
      moved: true,
      heldDrops: 2,
    });
  });

  it('should not count a repeated packet towards the probation, but keep it to play', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const t = RELATCH_AFTER_SILENCE_MS;
    admit(latch, packet(0xbbbb, 100), CALLER, t);
    admit(latch, packet(0xbbbb, 100), CALLER, t + 5);
    admit(latch, packet(0xbbbb, 101), CALLER, t + 20);
    const followed = admit(latch, packet(0xbbbb, 102), CALLER, t + 40);
    expect(followed).toMatchObject({ kind: 'followed', moved: false, heldDrops: 3 });
  });

  it('should keep held payloads in buffers of their own, not views of the datagram', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const batch = Buffer.alloc(64 * 1024, 7);
    const view: RtpPacket = { ...packet(0xbbbb, 100), payload: batch.subarray(0, 160) };
    admit(latch, view, STRANGER, RELATCH_AFTER_SILENCE_MS);
    admit(latch, packet(0xbbbb, 101), STRANGER, RELATCH_AFTER_SILENCE_MS + 20);
    const followed = admit(latch, packet(0xbbbb, 102), STRANGER, RELATCH_AFTER_SILENCE_MS + 40);
    const held = followed !== 'from-latched' && followed.kind === 'followed' ? followed.held : [];
    expect(held[0]?.payload[0]).toBe(7);
    // Not by size: Node's Buffer pool slab, where a copy may sit, is 8 KB on Node 20, 64 KB on 24.
    expect(held[0]?.payload.buffer).not.toBe(batch.buffer);
    batch.fill(9);
    expect(held[0]?.payload[0]).toBe(7);
  });
});

describe('when the far end re-INVITEs', () => {
  it('should latch afresh and tell the SSRC latched before, so a new stream starts over', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.restart();
    expect(latch.isLatched).toBe(false);
    expect(admit(latch, packet(0xcccc, 9), STRANGER, 10)).toEqual({
      kind: 'latched',
      previousSsrc: 0xaaaa,
    });
  });

  it('should latch afresh after a codec change without naming a previous SSRC', () => {
    const latch = namedLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.forget();
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 10)).toEqual({
      kind: 'latched',
      previousSsrc: undefined,
    });
  });
});

const ATTACKER: RemoteInfo = { address: '203.0.113.66', port: 6000, family: 'IPv4', size: 172 };
const PROXY: RemoteInfo = { address: '198.51.100.200', port: 5060, family: 'IPv4', size: 172 };

function eventPacket(ssrc: number, sequenceNumber: number): RtpPacket {
  return {
    ...packet(ssrc, sequenceNumber),
    payloadType: 101,
    payload: Buffer.from([1, 0x8a, 0, 160]),
  };
}

describe('when a source the call did not name sends', () => {
  it('should refuse it before anything is latched, and latch the named caller after', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    expect(admit(latch, packet(0xbad, 1), ATTACKER, 0)).toEqual({ kind: 'refused', log: true });
    expect(admit(latch, packet(0xbad, 2), ATTACKER, 20)).toEqual({ kind: 'refused', log: false });
    expect(latch.isLatched).toBe(false);
    expect(admit(latch, packet(0xaaaa, 1), CALLER, 30)).toMatchObject({ kind: 'latched' });
  });

  it('should never follow it after any silence, however long and in sequence its packets are', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const t = 10 * RELATCH_AFTER_SILENCE_MS;
    for (let i = 0; i < 20; i++)
      expect(admit(latch, packet(0xaaaa, 2 + i), ATTACKER, t + 20 * i)).toMatchObject({
        kind: 'refused',
      });
    expect(latch.ssrc).toBe(0xaaaa);
    expect(admit(latch, packet(0xaaaa, 2), CALLER, t + 500)).toBe('from-latched');
  });

  it('should log each refused source once, and at most sixteen of them per call', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    const logged: number[] = [];
    for (let port = 1000; port < 1040; port++) {
      for (let i = 0; i < 3; i++) {
        const decision = admit(latch, packet(1, i), { ...ATTACKER, port }, i);
        if (decision !== 'from-latched' && decision.kind === 'refused' && decision.log)
          logged.push(port);
      }
    }
    expect(logged).toEqual(Array.from({ length: 16 }, (_, i) => 1000 + i));
  });
});

describe('when the caller is behind NAT', () => {
  it('should latch its media from the INVITE source although the SDP names a private address', () => {
    const latch = new RtpSourceLatch(
      new MediaSourcePolicy({ signaling: PROXY.address, sdp: ['10.1.2.3'] }),
    );
    expect(admit(latch, packet(0xaaaa, 1), { ...PROXY, port: 31000 }, 0)).toMatchObject({
      kind: 'latched',
    });
  });

  it('should follow a rebinding to a new port of the named address after the silence rule', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    expect(admit(latch, packet(0xaaaa, 2), MOVED, 100)).toEqual({
      kind: 'drop',
      reason: 'unexpected-source',
    });
    const t = 100 + RELATCH_AFTER_SILENCE_MS;
    admit(latch, packet(0xaaaa, 50), MOVED, t);
    admit(latch, packet(0xaaaa, 51), MOVED, t + 20);
    expect(admit(latch, packet(0xaaaa, 52), MOVED, t + 40)).toMatchObject({
      kind: 'followed',
      moved: true,
    });
  });
});

describe('when a re-INVITE names another media address', () => {
  it('should latch from the new address and refuse the old one', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.restart(STRANGER.address);
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 10)).toMatchObject({ kind: 'refused' });
    expect(admit(latch, packet(0xcccc, 1), STRANGER, 20)).toMatchObject({ kind: 'latched' });
  });

  it('should keep the address it had when the re-INVITE holds with c=0.0.0.0', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.restart('0.0.0.0');
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 10)).toMatchObject({ kind: 'latched' });
  });
});

describe("when the tenant names its carrier's media ranges", () => {
  it('should latch media from inside a range and refuse media from outside', () => {
    const latch = new RtpSourceLatch(
      new MediaSourcePolicy({ signaling: PROXY.address, allowFrom: ['192.0.2.0/28'] }),
    );
    expect(admit(latch, packet(1, 1), { ...CALLER, address: '192.0.2.16' }, 0)).toMatchObject({
      kind: 'refused',
    });
    expect(admit(latch, packet(1, 1), CALLER, 0)).toMatchObject({ kind: 'latched' });
  });
});

describe('when the caller sends its digits as a stream with an SSRC of its own', () => {
  it('should take them at once from the latched address and port, and keep the audio latched', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    expect(latch.admitOther(eventPacket(0xd7d7, 500), CALLER, 10, true)).toEqual({
      kind: 'side-event',
    });
    expect(latch.ssrc).toBe(0xaaaa);
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 20)).toBe('from-latched');
  });

  it('should not take them from another port, nor from an address the call did not name', () => {
    const latch = new RtpSourceLatch(new MediaSourcePolicy({ sdp: [CALLER.address] }));
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    expect(latch.admitOther(eventPacket(0xd7d7, 500), MOVED, 10, true)).toEqual({
      kind: 'drop',
      reason: 'unexpected-source',
    });
    expect(latch.admitOther(eventPacket(0xd7d7, 500), ATTACKER, 10, true)).toMatchObject({
      kind: 'refused',
    });
  });
});
