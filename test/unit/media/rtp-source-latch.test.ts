import type { RemoteInfo } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import type { RtpPacket } from '../../../gateway/media/rtp-packet.ts';
import {
  RELATCH_AFTER_SILENCE_MS,
  RtpSourceLatch,
  type LatchDecision,
} from '../../../gateway/media/rtp-source-latch.ts';

const CALLER: RemoteInfo = { address: '192.0.2.10', port: 40000, family: 'IPv4', size: 172 };
const MOVED: RemoteInfo = { address: '192.0.2.10', port: 40002, family: 'IPv4', size: 172 };
const STRANGER: RemoteInfo = { address: '198.51.100.7', port: 5004, family: 'IPv4', size: 172 };

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
    const latch = new RtpSourceLatch();
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
    const latch = new RtpSourceLatch();
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
    const latch = new RtpSourceLatch();
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
    const latch = new RtpSourceLatch();
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
    const latch = new RtpSourceLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    const t = RELATCH_AFTER_SILENCE_MS;
    admit(latch, packet(0xbbbb, 100), CALLER, t);
    admit(latch, packet(0xbbbb, 100), CALLER, t + 5);
    admit(latch, packet(0xbbbb, 101), CALLER, t + 20);
    const followed = admit(latch, packet(0xbbbb, 102), CALLER, t + 40);
    expect(followed).toMatchObject({ kind: 'followed', moved: false, heldDrops: 3 });
  });

  it('should keep held payloads in buffers of their own, not views of the datagram', () => {
    const latch = new RtpSourceLatch();
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
    const latch = new RtpSourceLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.restart();
    expect(latch.isLatched).toBe(false);
    expect(admit(latch, packet(0xcccc, 9), STRANGER, 10)).toEqual({
      kind: 'latched',
      previousSsrc: 0xaaaa,
    });
  });

  it('should latch afresh after a codec change without naming a previous SSRC', () => {
    const latch = new RtpSourceLatch();
    admit(latch, packet(0xaaaa, 1), CALLER, 0);
    latch.forget();
    expect(admit(latch, packet(0xaaaa, 2), CALLER, 10)).toEqual({
      kind: 'latched',
      previousSsrc: undefined,
    });
  });
});
