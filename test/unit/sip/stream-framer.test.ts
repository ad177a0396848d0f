/**
 * The TCP framer: messages cut out by Content-Length however the stream is chunked, with the
 * header and body limits, in time linear in the bytes received. Before, every chunk was
 * concatenated onto the whole pending buffer and the buffer searched again from its start: a
 * peer trickling one 64 KB message a byte per segment cost about half a second of event loop.
 */
import { describe, expect, it } from 'vitest';
import { StreamFramer, type FramerOutput } from '../../../gateway/sip/stream-framer.ts';

const LIMITS = { maxHeaderBytes: 65_535, maxBodyBytes: 65_535 };

const message = (body: string, lengthHeader = 'Content-Length'): string =>
  `OPTIONS sip:100@127.0.0.1 SIP/2.0\r\nCall-ID: c${body.length}\r\n${lengthHeader}: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** Feeds `stream` cut at `cuts` (ascending offsets) and returns everything the framer produced. */
function frame(stream: Buffer, cuts: readonly number[], limits = LIMITS): FramerOutput[] {
  const framer = new StreamFramer(limits);
  const out: FramerOutput[] = [];
  let from = 0;
  for (const cut of [...cuts, stream.length]) {
    out.push(...framer.push(stream.subarray(from, cut)));
    from = cut;
  }
  return out;
}

const texts = (out: readonly FramerOutput[]): string[] =>
  out.map((o) => (o.type === 'message' ? o.data.toString() : `error:${o.reason}`));

/** A small deterministic generator, so a failing chunking can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

describe('when a stream of messages arrives in chunks', () => {
  const messages = [message(''), message('v=0\r\n\r\n'), message('x'.repeat(300), 'l')];
  const stream = Buffer.from(`\r\n\r\n${messages[0]}\r\n${messages[1]}${messages[2]}`);

  it('should give the same messages for every single cut point', () => {
    for (let cut = 0; cut <= stream.length; cut++)
      expect(texts(frame(stream, [cut]))).toEqual(messages);
  });

  it('should give the same messages one byte at a time and for random chunkings', () => {
    expect(
      texts(
        frame(
          stream,
          Array.from({ length: stream.length - 1 }, (_, i) => i + 1),
        ),
      ),
    ).toEqual(messages);
    const next = random(7);
    for (let run = 0; run < 200; run++) {
      const cuts = Array.from({ length: Math.floor(next() * 12) }, () =>
        Math.floor(next() * stream.length),
      ).sort((a, b) => a - b);
      expect(texts(frame(stream, cuts)), `cuts ${cuts.join(',')}`).toEqual(messages);
    }
  });

  it('should hand out copies that later chunks do not overwrite', () => {
    const framer = new StreamFramer(LIMITS);
    const first = framer.push(Buffer.from(messages[0] ?? ''));
    framer.push(Buffer.from(messages[1] ?? ''));
    expect(texts(first)).toEqual([messages[0]]);
  });
});

describe('when a stream breaks a limit or its framing', () => {
  it.each([
    [
      'headers longer than the limit without an end',
      'INVITE sip:a@b SIP/2.0\r\nX: ' + 'a'.repeat(200),
      { maxHeaderBytes: 100, maxBodyBytes: 100 },
      'header-too-large',
    ],
    [
      'headers longer than the limit with an end',
      `INVITE sip:a@b SIP/2.0\r\nX: ${'a'.repeat(200)}\r\nContent-Length: 0\r\n\r\n`,
      { maxHeaderBytes: 100, maxBodyBytes: 100 },
      'header-too-large',
    ],
    [
      'a body longer than the limit',
      'INVITE sip:a@b SIP/2.0\r\nContent-Length: 101\r\n\r\n',
      { maxHeaderBytes: 100, maxBodyBytes: 100 },
      'body-too-large',
    ],
    [
      'no Content-Length',
      'INVITE sip:a@b SIP/2.0\r\nCall-ID: x\r\n\r\n',
      LIMITS,
      'no-content-length',
    ],
  ])(
    'should report %s once, however it is chunked, and take nothing more',
    (_name, text, limits, reason) => {
      const bytes = Buffer.from(text);
      for (const cuts of [[], Array.from({ length: bytes.length - 1 }, (_, i) => i + 1)]) {
        const framer = new StreamFramer(limits);
        const out: FramerOutput[] = [];
        let from = 0;
        for (const cut of [...cuts, bytes.length]) {
          out.push(...framer.push(bytes.subarray(from, cut)));
          from = cut;
        }
        expect(texts(out)).toEqual([`error:${reason}`]);
        expect(framer.push(Buffer.from(message('')))).toEqual([]);
      }
    },
  );
});

describe('when a peer trickles a large message one byte per chunk', () => {
  it('should spend time linear in its size, not quadratic', { timeout: 30_000 }, () => {
    const size = 200_000;
    const limits = { maxHeaderBytes: 262_144, maxBodyBytes: 262_144 };
    const one = Buffer.from('A');
    const started = performance.now();
    // Headers that never end (the search for their end must resume, not restart)...
    const headers = new StreamFramer(limits);
    for (let i = 0; i < size; i++) headers.push(one);
    // ...and a body that comes a byte at a time (no copy of everything so far per byte).
    const body = new StreamFramer(limits);
    body.push(Buffer.from(`OPTIONS sip:a@b SIP/2.0\r\nContent-Length: ${size}\r\n\r\n`));
    let out: FramerOutput[] = [];
    for (let i = 0; i < size; i++) out = body.push(one);
    const elapsedMs = performance.now() - started;
    expect(out).toHaveLength(1);
    // About 0.1 s here; the quadratic framer took about 7 s for the same bytes.
    expect(elapsedMs).toBeLessThan(1_500);
  });
});
