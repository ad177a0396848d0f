import { describe, expect, it } from 'vitest';
import {
  MAX_RTP_PACKET_BYTES,
  RTP_DROP_REASONS,
  parseRtpPacket,
  serializeRtpHeader,
  serializeRtpPacket,
  type RtpDropReason,
  type RtpPacketInit,
} from '../../../gateway/media/rtp-packet.ts';
import { randomInt, seededRandom } from './seeded-random.ts';

function hex(text: string): Buffer {
  return Buffer.from(text.replace(/\s+/g, ''), 'hex');
}

describe('when parsing RTP packets', () => {
  it('should read every header field of a packet with CSRCs, an extension and padding', () => {
    // V=2 P=1 X=1 CC=2 | M=1 PT=0 | seq 0xABCD | ts 0x01020304 | ssrc 0xDEADBEEF
    const wire = hex(`
      b2 80 abcd 01020304 deadbeef
      00000011 00000022
      bede 0001 10ff0000
      7f7f7f
      0000 03`);
    const result = parseRtpPacket(wire);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const p = result.packet;
    expect(p.marker).toBe(true);
    expect(p.payloadType).toBe(0);
    expect(p.sequenceNumber).toBe(0xabcd);
    expect(p.timestamp).toBe(0x01020304);
    expect(p.ssrc).toBe(0xdeadbeef);
    expect(p.csrcs).toEqual([0x11, 0x22]);
    expect(p.extension?.profile).toBe(0xbede);
    expect(p.extension?.data.toString('hex')).toBe('10ff0000');
    expect(p.paddingBytes).toBe(3);
    expect(p.payload.toString('hex')).toBe('7f7f7f');
  });

  it('should accept a header-only packet with an empty payload', () => {
    const result = parseRtpPacket(hex('8008 0001 00000000 00000001'));
    expect(result.ok && result.packet.payload.length).toBe(0);
  });

  const bad: Array<[string, string | Buffer, RtpDropReason]> = [
    ['shorter than the fixed header', '80 00 0001 00000000 000000', 'truncated'],
    ['version 1', '40 00 0001 00000000 00000001 ff', 'bad-version'],
    ['version 0 (a STUN message)', '00 01 0000 2112a442 00000001 00000000', 'bad-version'],
    ['a CSRC count beyond the data', '83 00 0001 00000000 00000001 00000001', 'csrc-truncated'],
    ['an extension header cut off', '90 00 0001 00000000 00000001 bede', 'extension-truncated'],
    [
      'an extension length beyond the data',
      '90 00 0001 00000000 00000001 bede 0004 00000000',
      'extension-truncated',
    ],
    ['a padding count of zero', 'a0 00 0001 00000000 00000001 ff 00', 'bad-padding'],
    ['a padding count beyond the payload', 'a0 00 0001 00000000 00000001 ff 09', 'bad-padding'],
    ['an RTCP sender report on the RTP port', '80 c8 0006 00000001 00000000', 'rtcp'],
    ['a giant datagram', Buffer.alloc(MAX_RTP_PACKET_BYTES + 1, 0x80), 'too-large'],
  ];
  for (const [what, wire, reason] of bad) {
    it(`should drop ${what} as ${reason}`, () => {
      const result = parseRtpPacket(typeof wire === 'string' ? hex(wire) : wire);
      expect(result).toEqual({ ok: false, reason });
    });
  }
});

describe('when serializing RTP packets', () => {
  it('should produce the exact bytes of a simple PCMU packet', () => {
    const wire = serializeRtpPacket({
      marker: true,
      payloadType: 0,
      sequenceNumber: 1,
      timestamp: 160,
      ssrc: 0x1234,
      payload: hex('ff7f'),
    });
    expect(wire.toString('hex')).toBe('80800001000000a000001234ff7f');
  });

  it('should write the same fixed header alone as in a whole packet', () => {
    const init = {
      marker: true,
      payloadType: 111,
      sequenceNumber: 65535,
      timestamp: 0xfffffff0,
      ssrc: 0xdeadbeef,
    };
    const payload = hex('010203');
    expect(
      Buffer.concat([serializeRtpHeader(init), payload]).equals(
        serializeRtpPacket({ ...init, payload }),
      ),
    ).toBe(true);
  });

  it('should wrap sequence numbers and timestamps at their field width', () => {
    const wire = serializeRtpPacket({
      payloadType: 8,
      sequenceNumber: 0x10000 + 5,
      timestamp: 2 ** 32 + 7,
      ssrc: 1,
      payload: Buffer.alloc(0),
    });
    const result = parseRtpPacket(wire);
    expect(result.ok && [result.packet.sequenceNumber, result.packet.timestamp]).toEqual([5, 7]);
  });

  it('should round-trip random packets field for field', () => {
    const random = seededRandom(7);
    for (let i = 0; i < 2000; i++) {
      const init: RtpPacketInit = {
        marker: random() < 0.5,
        payloadType: randomInt(random, 128),
        sequenceNumber: randomInt(random, 65536),
        timestamp: randomInt(random, 2 ** 32),
        ssrc: randomInt(random, 2 ** 32),
        csrcs: Array.from({ length: randomInt(random, 16) }, () => randomInt(random, 2 ** 32)),
        paddingBytes: random() < 0.3 ? 1 + randomInt(random, 255) : 0,
        payload: Buffer.from(
          Array.from({ length: randomInt(random, 200) }, () => randomInt(random, 256)),
        ),
        ...(random() < 0.3
          ? {
              extension: {
                profile: randomInt(random, 65536),
                data: Buffer.alloc(4 * randomInt(random, 5), 0xaa),
              },
            }
          : {}),
      };
      // Payload types 72-76 with the marker set look like RTCP (RFC 5761); a sender never uses them.
      if (init.marker && init.payloadType >= 64 && init.payloadType <= 95) continue;
      const result = parseRtpPacket(serializeRtpPacket(init));
      expect(result.ok).toBe(true);
      if (!result.ok) return;
      expect(result.packet).toMatchObject({
        marker: init.marker,
        payloadType: init.payloadType,
        sequenceNumber: init.sequenceNumber,
        timestamp: init.timestamp,
        ssrc: init.ssrc,
        csrcs: init.csrcs,
        paddingBytes: init.paddingBytes,
      });
      expect(result.packet.payload.equals(init.payload)).toBe(true);
      expect(result.packet.extension?.data.length ?? 0).toBe(init.extension?.data.length ?? 0);
    }
  });
});

describe('when fuzzing the parser with mutated packets', () => {
  it('should return a packet or a counted drop reason for 100,000 mutations and never throw', () => {
    const random = seededRandom(2024);
    const seeds = [
      serializeRtpPacket({
        marker: true,
        payloadType: 0,
        sequenceNumber: 1,
        timestamp: 160,
        ssrc: 42,
        payload: Buffer.alloc(160, 0xff),
      }),
      serializeRtpPacket({
        payloadType: 101,
        sequenceNumber: 9,
        timestamp: 800,
        ssrc: 42,
        payload: hex('05 0a 00a0'),
      }),
      serializeRtpPacket({
        payloadType: 111,
        sequenceNumber: 65535,
        timestamp: 0xffffffff,
        ssrc: 7,
        csrcs: [1, 2, 3],
        extension: { profile: 0xbede, data: Buffer.alloc(8, 0x11) },
        paddingBytes: 4,
        payload: Buffer.alloc(60, 0x42),
      }),
    ];
    const counts = new Map<string, number>();
    const mutations = 100_000;
    for (let i = 0; i < mutations; i++) {
      const seed = seeds[i % seeds.length] as Buffer;
      const packet = mutate(seed, random);
      let key: string;
      try {
        const result = parseRtpPacket(packet);
        key = result.ok ? 'packet' : result.reason;
        if (result.ok) {
          // A parsed packet never points outside its datagram.
          expect(result.packet.payload.length).toBeLessThanOrEqual(packet.length);
        }
      } catch {
        key = 'threw';
      }
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    expect(counts.get('threw')).toBeUndefined();
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(mutations);
    for (const key of counts.keys()) expect(['packet', ...RTP_DROP_REASONS]).toContain(key);
    // The mutations reach both outcomes and several drop reasons.
    expect(counts.get('packet')).toBeGreaterThan(1000);
    expect(counts.size).toBeGreaterThanOrEqual(6);
  });
});

function mutate(seed: Buffer, random: () => number): Buffer {
  const roll = random();
  if (roll < 0.15) return seed.subarray(0, randomInt(random, seed.length + 1));
  if (roll < 0.2)
    return Buffer.from(Array.from({ length: randomInt(random, 64) }, () => randomInt(random, 256)));
  if (roll < 0.25)
    return Buffer.concat([seed, Buffer.alloc(randomInt(random, 3000), randomInt(random, 256))]);
  const out = Buffer.from(seed);
  const flips = 1 + randomInt(random, 4);
  for (let i = 0; i < flips; i++) {
    // Bias mutations towards the header, where the parser makes its decisions.
    const at =
      random() < 0.7 ? randomInt(random, Math.min(out.length, 32)) : randomInt(random, out.length);
    out[at] =
      random() < 0.5 ? randomInt(random, 256) : (out[at] as number) ^ (1 << randomInt(random, 8));
  }
  if (random() < 0.2) out[out.length - 1] = randomInt(random, 256);
  return out;
}
