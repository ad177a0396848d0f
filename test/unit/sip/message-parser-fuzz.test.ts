/**
 * Generated hostile input: 100,000 mutations of valid messages (byte flips, truncation, splices,
 * duplicated and deleted lines, huge values, random bytes). The parser must return a result for
 * every one, never throw, and leave memory where it found it.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';

const SEEDS = [
  'INVITE sip:+15551234567@gw.example.com SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK776;rport\r\nMax-Forwards: 70\r\nTo: <sip:+15551234567@gw.example.com>\r\nFrom: "Alice" <sip:alice@example.com>;tag=19\r\nCall-ID: a84b4c76e66710\r\nCSeq: 314159 INVITE\r\nContact: <sip:alice@10.0.0.1:5070>\r\nContent-Type: application/sdp\r\nContent-Length: 31\r\n\r\nv=0\r\nc=IN IP4 10.0.0.1\r\nm=audio\r\n',
  'SIP/2.0 200 OK\r\nVia: SIP/2.0/TCP p1;branch=z9hG4bK1, SIP/2.0/UDP p2;received=1.2.3.4;rport=9\r\nTo: <sip:a@b>;tag=9\r\nFrom: sip:c@d;tag=8\r\nCall-ID: z\r\nCSeq: 5 INVITE\r\nRecord-Route: <sip:p1;lr>, "x, y" <sip:p2;lr>\r\nl: 0\r\n\r\n',
  'OPTIONS sips:user;par=u%40example.net@[2001:db8::1]:5061;transport=tls?h=v SIP/2.0\r\nv: SIP / 2.0 / TLS h ; branch = z9hG4bKq\r\nt: tel:+1-555;phone-context=x\r\nf: "q\\"uoted" <sip:%41@h>;tag=1\r\ni: q@h\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 0\r\nl: 0\r\n\r\n',
];

const ALPHABET = ' \t\r\n:;,<>"\\%@=/[]?*0123456789abcdefSIPsip.-z+';

/** Deterministic PRNG (mulberry32) so a failure reproduces from its index. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mutate(random: () => number, source: Buffer): Buffer {
  const bytes = Buffer.from(source);
  const pick = (n: number): number => Math.floor(random() * n);
  const kind = pick(8);
  switch (kind) {
    case 0: {
      for (let i = 0, n = 1 + pick(8); i < n; i++) bytes[pick(bytes.length)] = pick(256);
      return bytes;
    }
    case 1:
      return bytes.subarray(0, pick(bytes.length));
    case 2: {
      for (let i = 0, n = 1 + pick(6); i < n; i++)
        bytes[pick(bytes.length)] = ALPHABET.charCodeAt(pick(ALPHABET.length));
      return bytes;
    }
    case 3: {
      const lines = bytes.toString('latin1').split('\r\n');
      const at = pick(lines.length);
      if (random() < 0.5) lines.splice(at, 1);
      else lines.splice(at, 0, lines[pick(lines.length)] ?? '');
      return Buffer.from(lines.join('\r\n'), 'latin1');
    }
    case 4: {
      const at = pick(bytes.length);
      return Buffer.concat([
        bytes.subarray(0, at),
        Buffer.alloc(pick(3000), ALPHABET.charAt(pick(ALPHABET.length))),
        bytes.subarray(at),
      ]);
    }
    case 5: {
      const other = Buffer.from(SEEDS[pick(SEEDS.length)] ?? '');
      return Buffer.concat([
        bytes.subarray(0, pick(bytes.length)),
        other.subarray(pick(other.length)),
      ]);
    }
    case 6: {
      const noise = Buffer.alloc(1 + pick(400));
      for (let i = 0; i < noise.length; i++) noise[i] = pick(256);
      return noise;
    }
    default: {
      const text = bytes.toString('latin1');
      const at = pick(text.length);
      return Buffer.from(
        `${text.slice(0, at)}${ALPHABET.charAt(pick(ALPHABET.length)).repeat(1 + pick(50))}${text.slice(at)}`,
        'latin1',
      );
    }
  }
}

/** A real collection before each reading; the test workers do not run with --expose-gc. */
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

describe('when the parser is fed 100,000 mutated messages', () => {
  it('should return a result for each without throwing, and keep memory flat', () => {
    const random = prng(4475);
    const seeds = SEEDS.map((seed) => Buffer.from(seed));
    const run = (count: number): { ok: number; failed: number; answerable: number } => {
      const tally = { ok: 0, failed: 0, answerable: 0 };
      for (let i = 0; i < count; i++) {
        let input: Buffer = seeds[i % seeds.length] ?? Buffer.alloc(0);
        // Stack up to three mutations so damage compounds.
        for (let m = 0, n = 1 + Math.floor(random() * 3); m < n; m++) input = mutate(random, input);
        const result = parseSipMessage(input, { maxBytes: 65_535, stream: i % 2 === 0 });
        if (result.ok) tally.ok++;
        else {
          tally.failed++;
          expect(result.reason.length).toBeLessThan(200);
          if (result.answerable !== undefined) tally.answerable++;
        }
      }
      return tally;
    };
    // Warm up so JIT code and caches are not counted as growth.
    run(5_000);
    const before = heapAfterGc();
    const tally = run(100_000);
    const after = heapAfterGc();
    expect(tally.ok + tally.failed).toBe(100_000);
    // Both outcomes occur: the mutations are neither all fatal nor all harmless.
    expect(tally.ok).toBeGreaterThan(1_000);
    expect(tally.failed).toBeGreaterThan(10_000);
    expect(tally.answerable).toBeGreaterThan(1_000);
    expect(after - before).toBeLessThan(2 * 1024 * 1024);
  }, 120_000);
});
