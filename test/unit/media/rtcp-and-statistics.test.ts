import { describe, expect, it } from 'vitest';
import { ReceiveStatistics } from '../../../gateway/media/receive-statistics.ts';
import {
  RTCP_RR,
  RTCP_SDES,
  RTCP_SR,
  parseRtcpCompound,
  serializeRtcpReport,
} from '../../../gateway/media/rtcp-packet.ts';
import { randomInt, seededRandom } from './seeded-random.ts';

describe('when writing RTCP reports', () => {
  it('should write a sender report with one block followed by SDES CNAME, 32-bit aligned', () => {
    const wire = serializeRtcpReport({
      ssrc: 0x11223344,
      cname: 'callgate@127.0.0.1',
      sender: { wallClockMs: 0, rtpTimestamp: 160, packets: 3, octets: 516 },
      block: {
        ssrc: 0xcafe,
        fractionLost: 128,
        cumulativeLost: 5,
        extendedHighestSequence: 70000,
        jitter: 40,
        lastSenderReport: 0xabcd,
        delaySinceLastSenderReport: 65536,
      },
    });
    expect(wire.length % 4).toBe(0);
    expect([wire[0], wire[1], wire.readUInt16BE(2)]).toEqual([0x81, RTCP_SR, 12]);
    // NTP seconds of the Unix epoch.
    expect(wire.readUInt32BE(8)).toBe(2_208_988_800);
    expect([wire.readUInt32BE(16), wire.readUInt32BE(20), wire.readUInt32BE(24)]).toEqual([
      160, 3, 516,
    ]);
    expect(wire.readUInt32BE(28)).toBe(0xcafe);
    expect(wire.readUInt32BE(32)).toBe(((128 << 24) | 5) >>> 0);
    expect(wire.readUInt32BE(36)).toBe(70000);
    expect(wire[53]).toBe(RTCP_SDES);
    expect(wire.subarray(62, 62 + 18).toString()).toBe('callgate@127.0.0.1');
    const parsed = parseRtcpCompound(wire);
    expect(parsed).toMatchObject({
      ok: true,
      summary: { senderSsrc: 0x11223344, packets: 2, bye: false },
    });
  });

  it('should write a receiver report when nothing was sent', () => {
    const wire = serializeRtcpReport({ ssrc: 1, cname: 'x' });
    expect([wire[0], wire[1]]).toEqual([0x80, RTCP_RR]);
    expect(parseRtcpCompound(wire).ok).toBe(true);
  });

  it('should reject broken compounds with a reason, never throwing, over 20,000 mutations', () => {
    const seed = serializeRtcpReport({
      ssrc: 1,
      cname: 'peer',
      sender: { wallClockMs: 1, rtpTimestamp: 1, packets: 1, octets: 1 },
    });
    const random = seededRandom(5);
    const outcomes = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const data = Buffer.from(
        seed.subarray(0, random() < 0.2 ? randomInt(random, seed.length) : seed.length),
      );
      if (data.length > 0)
        data[randomInt(random, Math.min(data.length, 8))] = randomInt(random, 256);
      const result = parseRtcpCompound(data);
      outcomes.add(result.ok ? 'ok' : result.reason);
    }
    expect(outcomes).toContain('ok');
    expect(outcomes).toContain('bad-version');
    expect(outcomes).toContain('truncated');
  });
});

describe('when counting received packets (RFC 3550 A.1, A.3, A.8)', () => {
  it('should count loss across the sequence wrap and report the fraction lost per interval', () => {
    const stats = new ReceiveStatistics(8000);
    let seq = 65530;
    for (let i = 0; i < 20; i++, seq = (seq + 1) & 0xffff) {
      if (i % 5 === 4) continue;
      stats.update(seq, i * 160, i * 20);
    }
    const report = stats.report();
    expect(report.cumulativeLost).toBe(3);
    expect(report.extendedHighestSequence).toBe(65536 + 12);
    expect(report.fractionLost).toBe(Math.floor((3 * 256) / 19));
    expect(stats.report().fractionLost).toBe(0);
  });

  it('should measure jitter from arrival against timestamps', () => {
    const steady = new ReceiveStatistics(8000);
    const jittery = new ReceiveStatistics(8000);
    for (let i = 0; i < 200; i++) {
      steady.update(i, i * 160, i * 20);
      jittery.update(i, i * 160, i * 20 + (i % 2) * 10);
    }
    expect(steady.jitterMs).toBe(0);
    expect(jittery.jitterMs).toBeGreaterThan(8);
    expect(jittery.jitterMs).toBeLessThan(11);
  });

  it('should treat a single far jump as suspect and follow it once confirmed', () => {
    const stats = new ReceiveStatistics(8000);
    stats.update(100, 0, 0);
    expect(stats.update(40000, 0, 20)).toBe(false);
    expect(stats.update(40001, 160, 40)).toBe(true);
    expect(stats.cumulativeLost).toBe(0);
  });
});
