/**
 * A re-INVITE changes the codec of a live call, and barge-in reads the playout position without
 * clearing it: both over real UDP, asserted on what went on the wire.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { PCMA, wireCodec } from '../../../gateway/media/audio-format.ts';
import { decodeAlaw, decodeUlaw, encodeAlaw, encodeUlaw } from '../../../gateway/media/g711.ts';
import { OpusCodec } from '../../../gateway/media/opus-codec.ts';
import type { RtpPacket } from '../../../gateway/media/rtp-packet.ts';
import { parseTelephoneEvent } from '../../../gateway/media/telephone-event.ts';
import { RtpSessionHarness, TELEPHONE_EVENT, audioEvents, stream } from './rtp-session-harness.ts';
import { sleep, waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(2);
afterEach(() => harness.closeAll());

/** 20 ms μ-law frames of a 300 Hz tone whose level changes per frame, so every frame differs. */
function toneFrames(count: number): Buffer[] {
  return Array.from({ length: count }, (_, f) =>
    encodeUlaw(
      Int16Array.from({ length: 160 }, (_, i) =>
        Math.round((1000 + 150 * f) * Math.sin((2 * Math.PI * 300 * (f * 160 + i)) / 8000)),
      ),
    ),
  );
}

function expectContinuous(packets: readonly RtpPacket[], samplesPerFrame: number): void {
  for (let i = 1; i < packets.length; i++) {
    expect(
      ((packets[i]?.sequenceNumber ?? 0) - (packets[i - 1]?.sequenceNumber ?? 0)) & 0xffff,
    ).toBe(1);
    expect(((packets[i]?.timestamp ?? 0) - (packets[i - 1]?.timestamp ?? 0)) >>> 0).toBe(
      samplesPerFrame,
    );
  }
}

describe('when a re-INVITE switches PCMU to PCMA mid-utterance', () => {
  it(
    'should send the rest of the item as A-law of the same audio on the same SSRC, with no gap in sequence or timestamp and a marker where it changed',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await harness.start();
      const frames = toneFrames(40);
      session.play('item', Buffer.concat(frames));
      session.endItem('item');
      await waitFor(() => peer.packets().length >= 10);
      session.setCodec({ codec: PCMA, telephoneEventPayloadType: TELEPHONE_EVENT });
      await waitFor(() => events.some((e) => e.type === 'item-played'), 3000);
      await sleep(40);
      const out = peer.packets();
      const switched = out.findIndex((p) => p.payloadType === 8);
      expect(out).toHaveLength(40);
      expect(switched).toBeGreaterThanOrEqual(10);
      expect(out.slice(0, switched).every((p) => p.payloadType === 0)).toBe(true);
      expect(out.slice(switched).every((p) => p.payloadType === 8)).toBe(true);
      expect(new Set(out.map((p) => p.ssrc))).toEqual(new Set([session.ssrc]));
      expectContinuous(out, 160);
      expect(out.flatMap((p, i) => (p.marker ? [i] : []))).toEqual([0, switched]);
      out.forEach((p, i) =>
        expect(
          p.payload.equals(
            p.payloadType === 0
              ? (frames[i] as Buffer)
              : encodeAlaw(decodeUlaw(frames[i] as Buffer)),
          ),
        ).toBe(true),
      );
      expect(events.find((e) => e.type === 'item-played')).toEqual({
        type: 'item-played',
        itemId: 'item',
        sentMs: 800,
      });
      expect(events.find((e) => e.type === 'codec-changed')).toMatchObject({
        previous: { name: 'PCMU' },
        codec: { name: 'PCMA' },
        sendSsrc: session.ssrc,
      });
    },
  );

  it('should hear the caller in A-law from then on and drop the old payload type', async () => {
    const { session, peer, events } = await harness.start();
    session.setCodec({ codec: PCMA, telephoneEventPayloadType: TELEPHONE_EVENT });
    const alaw = toneFrames(10).map((f) => encodeAlaw(decodeUlaw(f)));
    await stream(peer, session.localPort, 10, {
      ssrc: 1,
      firstSeq: 10,
      firstByte: 0,
      payloadType: 8,
      payload: (i) => alaw[i] as Buffer,
    });
    await stream(peer, session.localPort, 3, {
      ssrc: 1,
      firstSeq: 20,
      firstByte: 0,
      payloadType: 0,
    });
    await waitFor(() => audioEvents(events).length >= 10);
    await sleep(80);
    const heard = audioEvents(events);
    // The model still speaks μ-law: the caller's A-law is transcoded for it.
    expect(heard).toHaveLength(10);
    heard.forEach((audio, i) =>
      expect(audio.equals(encodeUlaw(decodeAlaw(alaw[i] as Buffer)))).toBe(true),
    );
    expect(session.stats().dropped['unknown-payload-type']).toBe(3);
  });
});

describe('when a re-INVITE switches PCMU to Opus mid-utterance', () => {
  it(
    'should go on with Opus under a new SSRC and a 48 kHz clock, keeping the item whole for clear()',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await harness.start();
      const frames = toneFrames(60);
      session.play('item', Buffer.concat(frames));
      await waitFor(() => peer.packets().length >= 8);
      const firstSsrc = session.ssrc;
      session.setCodec({
        codec: wireCodec('opus', 111),
        telephoneEventPayloadType: TELEPHONE_EVENT,
      });
      await waitFor(() => peer.packets().filter((p) => p.payloadType === 111).length >= 15);
      const cleared = session.clear();
      await sleep(60);
      const out = peer.packets();
      const pcmu = out.filter((p) => p.payloadType === 0);
      const opus = out.filter((p) => p.payloadType === 111);
      expect(pcmu.length + opus.length).toBe(out.length);
      expect(new Set(pcmu.map((p) => p.ssrc))).toEqual(new Set([firstSsrc]));
      expect(new Set(opus.map((p) => p.ssrc))).toEqual(new Set([session.ssrc]));
      expect(session.ssrc).not.toBe(firstSsrc);
      expectContinuous(pcmu, 160);
      expectContinuous(opus, 960);
      expect(opus[0]?.marker).toBe(true);
      const decoder = new OpusCodec({ sampleRate: 8000 });
      for (const packet of opus) expect(decoder.decode(packet.payload)?.length).toBe(160);
      // Not one frame was lost or doubled by the switch: sent plus dropped is the whole item.
      expect(cleared?.sentMs).toBe(out.length * 20);
      expect((cleared?.sentMs ?? 0) + (cleared?.droppedMs ?? 0)).toBe(1200);
      expect(events.find((e) => e.type === 'codec-changed')).toMatchObject({
        codec: { name: 'opus', clockRate: 48000 },
        sendSsrc: session.ssrc,
      });
    },
  );

  it('should decode the caller’s Opus into the model’s μ-law', async () => {
    const { session, peer, events } = await harness.start();
    session.setCodec({ codec: wireCodec('opus', 111) });
    const encoder = new OpusCodec({ sampleRate: 8000 });
    const packets = toneFrames(10).map((f) => encoder.encode(decodeUlaw(f)));
    await stream(peer, session.localPort, 10, {
      ssrc: 5,
      firstSeq: 1,
      firstByte: 0,
      payloadType: 111,
      payload: (i) => packets[i] as Buffer,
    });
    await waitFor(() => audioEvents(events).length >= 10);
    expect(audioEvents(events).every((audio) => audio.length === 160)).toBe(true);
  });
});

/** RMS of a G.711 frame, decoded. */
function level(packet: RtpPacket): number {
  const pcm = packet.payloadType === 8 ? decodeAlaw(packet.payload) : decodeUlaw(packet.payload);
  return Math.sqrt(pcm.reduce((sum, x) => sum + x * x, 0) / pcm.length);
}

describe('when a re-INVITE switches PCMU to PCMA while a 24 kHz model answer is queued', () => {
  it(
    'should send every queued frame at the answer’s level, then the next answer from its first sample, with nothing of the first in it',
    { retry: 2 },
    async () => {
      const { session, peer } = await harness.start({
        model: { encoding: 'pcm16', sampleRate: 24000 },
      });
      // 600 ms of a steady 400 Hz tone, then 200 ms of digital silence as the next item.
      const tone = Buffer.alloc(2 * 24 * 600);
      for (let i = 0; i < tone.length / 2; i++)
        tone.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 400 * i) / 24000)), 2 * i);
      session.play('tone', tone);
      session.endItem('tone');
      session.play('quiet', Buffer.alloc(2 * 24 * 200));
      session.endItem('quiet');
      await waitFor(() => peer.packets().length >= 5);
      session.setCodec({ codec: PCMA, telephoneEventPayloadType: TELEPHONE_EVENT });
      await waitFor(() => peer.packets().length >= 40, 3000);
      const out = peer.packets();
      const switched = out.findIndex((p) => p.payloadType === 8);
      expect(switched).toBeGreaterThanOrEqual(5);
      expect(switched).toBeLessThan(29);
      const levels = out.map(level);
      // The tone's frames: the first and last carry the resampler's ramps; every other one, on both
      // sides of the switch, is at the tone's level (RMS of 8000 * sin is 5657).
      for (const rms of levels.slice(1, 29)) expect(rms).toBeGreaterThan(5000);
      // The silence: no sample of the tone carried over into it.
      for (const rms of levels.slice(30, 40)) expect(rms).toBeLessThan(20);
    },
  );
});

describe('when a re-INVITE moves the call to another clock rate while digits are queued', () => {
  it(
    'should send the queued digits under the new SSRC on its clock, each once',
    { retry: 2 },
    async () => {
      const { session, peer } = await harness.start();
      session.sendDigit('1', 100);
      session.sendDigit('2', 100);
      session.sendDigit('3', 100);
      await waitFor(() => peer.packets().some((p) => p.payloadType === TELEPHONE_EVENT));
      const firstSsrc = session.ssrc;
      session.setCodec({
        codec: wireCodec('opus', 111),
        telephoneEventPayloadType: TELEPHONE_EVENT,
      });
      await sleep(600);
      const events = peer.packets().filter((p) => p.payloadType === TELEPHONE_EVENT);
      const started = (ssrc: number): string[] =>
        events
          .filter((p) => p.ssrc === ssrc && p.marker)
          .map((p) => String(parseTelephoneEvent(p.payload)?.digit));
      expect(started(firstSsrc)).toEqual(['1']);
      expect(started(session.ssrc)).toEqual(['2', '3']);
      const ended = events.filter(
        (p) => p.ssrc === session.ssrc && parseTelephoneEvent(p.payload)?.end === true,
      );
      // 100 ms on a 48 kHz clock: 4800 units, each end sent three times.
      expect(ended.map((p) => parseTelephoneEvent(p.payload)?.duration)).toEqual([
        4800, 4800, 4800, 4800, 4800, 4800,
      ]);
    },
  );
});

describe('when a re-INVITE keeps the codec (hold, resume, a new address)', () => {
  it('should change nothing on the wire', { retry: 2 }, async () => {
    const { session, peer, events } = await harness.start();
    session.play('item', Buffer.concat(toneFrames(10)));
    await waitFor(() => peer.packets().length >= 3);
    session.setCodec({ codec: wireCodec('PCMU', 0), telephoneEventPayloadType: TELEPHONE_EVENT });
    await waitFor(() => peer.packets().length >= 10);
    const out = peer.packets();
    expectContinuous(out, 160);
    expect(out.filter((p) => p.marker)).toHaveLength(1);
    expect(events.some((e) => e.type === 'codec-changed')).toBe(false);
  });
});

describe('when barge-in asks how much of the answer was played', () => {
  it(
    'should tell the played milliseconds of the current item without stopping it',
    { retry: 2 },
    async () => {
      const { session, peer, events } = await harness.start();
      session.play('item_a', Buffer.concat(toneFrames(25)));
      session.endItem('item_a');
      await waitFor(() => peer.packets().length >= 8);
      const position = session.playback();
      const sentThen = peer.packets().length;
      expect(position?.itemId).toBe('item_a');
      expect(Math.abs((position?.sentMs ?? 0) - sentThen * 20)).toBeLessThanOrEqual(20);
      expect((position?.sentMs ?? 0) + (position?.queuedMs ?? 0)).toBe(500);
      expect(position?.ended).toBe(true);
      expect(session.playedMs('item_a')).toBe(position?.sentMs);
      // Reading the position cleared nothing: the whole item goes out.
      await waitFor(() => events.some((e) => e.type === 'item-played'));
      expect(peer.packets()).toHaveLength(25);
      expect(session.playback()).toBeNull();
      expect(session.playedMs('item_a')).toBe(500);
      expect(session.playedMs('never_played')).toBeUndefined();
    },
  );

  it('should still tell the played milliseconds of an item after clear() dropped it', async () => {
    const { session, peer } = await harness.start();
    session.play('item_b', Buffer.concat(toneFrames(50)));
    await waitFor(() => peer.packets().length >= 5);
    const cleared = session.clear();
    expect(session.playback()).toBeNull();
    expect(session.playedMs('item_b')).toBe(cleared?.sentMs);
    expect(cleared?.sentMs).toBeGreaterThanOrEqual(100);
  });
});
