/**
 * A G.722 call over real UDP: what goes on the wire (payload type 9, 160 bytes and 160 timestamp
 * units per 20 ms, the model's tone), what the model hears of the caller, a lost packet, DTMF
 * beside it, and a re-INVITE from PCMU to G.722.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { G722 } from '../../../gateway/media/audio-format.ts';
import { encodeUlaw } from '../../../gateway/media/g711.ts';
import { G722Codec } from '../../../gateway/media/g722-codec.ts';
import { pcm16FromBytes } from '../../../gateway/media/pcm.ts';
import type { RtpPacket } from '../../../gateway/media/rtp-packet.ts';
import { parseTelephoneEvent } from '../../../gateway/media/telephone-event.ts';
import { RtpSessionHarness, TELEPHONE_EVENT, audioEvents, stream } from './rtp-session-harness.ts';
import { sleep, waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(8);
afterEach(() => harness.closeAll());

const MODEL_24K = { encoding: 'pcm16', sampleRate: 24000 } as const;

function toneBytes(rate: number, frequency: number, amplitude: number, ms: number): Buffer {
  const samples = (rate * ms) / 1000;
  const out = Buffer.alloc(2 * samples);
  for (let i = 0; i < samples; i++)
    out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * frequency * i) / rate)), 2 * i);
  return out;
}

/** Amplitude of one frequency in a signal (Goertzel). */
function toneAmplitude(signal: Int16Array, rate: number, frequency: number): number {
  const w = (2 * Math.PI * frequency) / rate;
  let s1 = 0;
  let s2 = 0;
  for (const x of signal) {
    const s0 = x + 2 * Math.cos(w) * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return (2 * Math.sqrt(s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2)) / signal.length;
}

function expectContinuous(packets: readonly RtpPacket[]): void {
  for (let i = 1; i < packets.length; i++) {
    expect(
      ((packets[i]?.sequenceNumber ?? 0) - (packets[i - 1]?.sequenceNumber ?? 0)) & 0xffff,
    ).toBe(1);
    expect(((packets[i]?.timestamp ?? 0) - (packets[i - 1]?.timestamp ?? 0)) >>> 0).toBe(160);
  }
}

/** 20 ms G.722 payloads of a caller's tone, from an encoder of the caller's own. */
function callerPayloads(count: number, frequency: number): Buffer[] {
  const encoder = new G722Codec();
  const pcm = pcm16FromBytes(toneBytes(16000, frequency, 6000, count * 20));
  return Array.from({ length: count }, (_, f) =>
    encoder.encode(pcm.subarray(f * 320, (f + 1) * 320)),
  );
}

describe('when a G.722 call plays a 24 kHz model answer', () => {
  it(
    'should send payload type 9 packets of 160 bytes, 160 timestamp units apart, that decode to the answer’s tone',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await harness.start({ codec: G722, model: MODEL_24K });
      session.play('item', toneBytes(24000, 5000, 8000, 600));
      session.endItem('item');
      await waitFor(() => events.some((e) => e.type === 'item-played'), 3000);
      await sleep(40);
      const out = peer.packets();
      expect(out.length).toBeGreaterThanOrEqual(30);
      expect(out.every((p) => p.payloadType === 9 && p.payload.length === 160)).toBe(true);
      expect(out[0]?.marker).toBe(true);
      expectContinuous(out);
      const decoder = new G722Codec();
      const heard = out.map((p) => decoder.decode(p.payload) ?? new Int16Array(0));
      const steady = Int16Array.from(heard.slice(3, -3).flatMap((pcm) => [...pcm]));
      // 5 kHz: a tone G.711 could not carry at all.
      expect(toneAmplitude(steady, 16000, 5000) / 8000).toBeGreaterThan(0.8);
    },
  );
});

describe('when the caller speaks G.722', () => {
  it('should give the model 20 ms of 24 kHz PCM per packet carrying the caller’s tone', async () => {
    const { session, peer, events } = await harness.start({ codec: G722, model: MODEL_24K });
    const payloads = callerPayloads(20, 440);
    await stream(peer, session.localPort, 20, {
      ssrc: 7,
      firstSeq: 100,
      firstByte: 0,
      payloadType: 9,
      payload: (i) => payloads[i] as Buffer,
    });
    await waitFor(() => audioEvents(events).length >= 20);
    const heard = audioEvents(events);
    expect(heard.slice(2).every((audio) => audio.length === 960)).toBe(true);
    const pcm = pcm16FromBytes(Buffer.concat(heard.slice(4)));
    expect(toneAmplitude(pcm, 24000, 440) / 6000).toBeGreaterThan(0.85);
  });

  it('should leave a lost packet as a 20 ms gap, not a G.711 repeat of the one before', async () => {
    const { session, peer, events } = await harness.start({ codec: G722, model: MODEL_24K });
    const payloads = callerPayloads(12, 440);
    const sent = payloads.map((payload, i) => ({ payload, i })).filter(({ i }) => i !== 6);
    for (const { payload, i } of sent) {
      peer.send(
        {
          payloadType: 9,
          marker: i === 0,
          sequenceNumber: 500 + i,
          timestamp: i * 160,
          ssrc: 9,
          payload,
        },
        session.localPort,
      );
      await sleep(20);
    }
    await waitFor(() => audioEvents(events).length >= 11);
    await sleep(100);
    expect(audioEvents(events)).toHaveLength(11);
    expect(events.some((e) => e.type === 'audio' && e.concealed)).toBe(false);
    expect(session.stats().lost).toBe(1);
    expect(session.stats().concealed).toBe(0);
  });

  it('should read RFC 4733 digits at the 8 kHz RTP clock beside G.722, and send them the same way', async () => {
    const { session, peer, events } = await harness.start({ codec: G722, model: MODEL_24K });
    const payloads = callerPayloads(3, 440);
    await stream(peer, session.localPort, 3, {
      ssrc: 11,
      firstSeq: 1,
      firstByte: 0,
      payloadType: 9,
      payload: (i) => payloads[i] as Buffer,
    });
    for (let i = 0; i < 6; i++) {
      const end = i >= 3;
      // Event 5, volume 10, duration in 8 kHz units.
      const payload = Buffer.from([5, (end ? 0x80 : 0) | 10, 0, 0]);
      payload.writeUInt16BE(Math.min(i + 1, 4) * 160, 2);
      peer.send(
        {
          payloadType: TELEPHONE_EVENT,
          marker: i === 0,
          sequenceNumber: 4 + i,
          timestamp: 480,
          ssrc: 11,
          payload,
        },
        session.localPort,
      );
      await sleep(20);
    }
    await waitFor(() => events.some((e) => e.type === 'dtmf'));
    expect(events.flatMap((e) => (e.type === 'dtmf' ? [e.digit] : []))).toEqual(['5']);
    session.sendDigit('7', 100);
    await waitFor(
      () => peer.packets().filter((p) => p.payloadType === TELEPHONE_EVENT).length >= 7,
    );
    const te = peer.packets().filter((p) => p.payloadType === TELEPHONE_EVENT);
    const last = parseTelephoneEvent(te[te.length - 1]?.payload ?? Buffer.alloc(0));
    expect(last).toMatchObject({ digit: '7', end: true, duration: 800 });
  });
});

describe('when a re-INVITE switches PCMU to G.722', () => {
  it(
    'should go on in G.722 on the same SSRC with no gap in sequence or timestamp, since both clocks are 8 kHz',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await harness.start();
      const frames = Array.from({ length: 30 }, (_, f) =>
        encodeUlaw(
          Int16Array.from({ length: 160 }, (_, i) =>
            Math.round(4000 * Math.sin((2 * Math.PI * 300 * (f * 160 + i)) / 8000)),
          ),
        ),
      );
      session.play('item', Buffer.concat(frames));
      session.endItem('item');
      await waitFor(() => peer.packets().length >= 8);
      session.setCodec({ codec: G722, telephoneEventPayloadType: TELEPHONE_EVENT });
      await waitFor(() => events.some((e) => e.type === 'item-played'), 3000);
      await sleep(40);
      const out = peer.packets();
      const switched = out.findIndex((p) => p.payloadType === 9);
      expect(out).toHaveLength(30);
      expect(switched).toBeGreaterThanOrEqual(8);
      expect(
        out.slice(switched).every((p) => p.payloadType === 9 && p.payload.length === 160),
      ).toBe(true);
      expect(new Set(out.map((p) => p.ssrc))).toEqual(new Set([session.ssrc]));
      expectContinuous(out);
      expect(out[switched]?.marker).toBe(true);
      const decoder = new G722Codec();
      const heard = out.slice(switched).map((p) => decoder.decode(p.payload) ?? new Int16Array(0));
      const steady = Int16Array.from(heard.slice(2, -1).flatMap((pcm) => [...pcm]));
      expect(toneAmplitude(steady, 16000, 300) / 4000).toBeGreaterThan(0.7);
    },
  );
});
