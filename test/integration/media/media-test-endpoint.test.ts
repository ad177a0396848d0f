/**
 * The media test modes over real UDP, with a scripted call in place of SIP: what a re-INVITE, a
 * SIP INFO digit and a silent caller do to the echo and the recording.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { decodeUlaw, encodeAlaw } from '../../../gateway/media/g711.ts';
import {
  MediaTestEndpoint,
  type MediaTestCall,
  type MediaTestDialogEvent,
  type MediaTestMedia,
  type MediaTestRecording,
} from '../../../gateway/media/media-test-endpoint.ts';
import { MonotonicMediaTimer } from '../../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { readWavFile } from '../../../gateway/media/wav-file.ts';
import { RtpPeer, sleep, waitFor } from './rtp-peer.ts';
import { RtpSessionHarness, audioPayload, stream } from './rtp-session-harness.ts';

const harness = new RtpSessionHarness(4);
const quietLogger = new Logger({ level: 'error', sink: { write: () => {} } });
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A call as signaling would hand it over, driven by the test. */
class ScriptedCall implements MediaTestCall {
  readonly callId = `call-${Math.random().toString(36).slice(2)}@test`;
  readonly hangups: number[] = [];
  private readonly listeners = new Set<(event: MediaTestDialogEvent) => void>();
  readonly dialog = {
    on: (listener: (event: MediaTestDialogEvent) => void) => {
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    },
    hangup: async () => {
      this.hangups.push(Date.now());
      this.send({ type: 'ended' });
    },
  };

  constructor(private readonly media: MediaTestMedia) {}

  accept(): { ok: true; media: MediaTestMedia } {
    return { ok: true, media: this.media };
  }

  reject(): void {}

  send(event: MediaTestDialogEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

async function answer(
  mode: 'echo' | 'record',
  media: Partial<MediaTestMedia> & { remote: MediaTestMedia['remote'] },
  mediaTimeoutMs = 5000,
) {
  const recordDir = mkdtempSync(join(tmpdir(), 'callgate-media-test-'));
  cleanup.push(() => rmSync(recordDir, { recursive: true, force: true }));
  const timer = new MonotonicMediaTimer();
  const call = new ScriptedCall({
    codec: 'PCMU',
    payloadType: 0,
    telephoneEvent: { payloadType: 101 },
    held: false,
    ...media,
  });
  const endpoint = await MediaTestEndpoint.answer(call, {
    mode,
    recordDir,
    config: harness.config({ mediaTimeoutMs }),
    ports: new RtpPortAllocator({
      portMin: harness.config().portMin,
      portMax: harness.config().portMax,
    }),
    scheduler: new PlayoutScheduler({ timer }),
    timer,
    logger: quietLogger,
  });
  if (endpoint === undefined) throw new Error('not answered');
  cleanup.push(() => endpoint.hangup());
  const recording = () =>
    JSON.parse(
      readFileSync(join(recordDir, `${call.callId.replace(/[^A-Za-z0-9._-]/g, '_')}.json`), 'utf8'),
    ) as MediaTestRecording;
  return { call, endpoint, recordDir, recording, port: endpoint.rtpSession.localPort };
}

async function peer(): Promise<RtpPeer> {
  const created = await RtpPeer.open();
  cleanup.push(() => created.close());
  return created;
}

describe('when the caller of the echo number changes codec with a re-INVITE', () => {
  it('should echo in A-law from then on, the same audio it sends', async () => {
    const caller = await peer();
    const { call, port } = await answer('echo', {
      remote: { address: '127.0.0.1', port: caller.port },
    });
    await stream(caller, port, 10, { ssrc: 1, firstSeq: 10, firstByte: 0 });
    await waitFor(() => caller.packets().filter((p) => p.payloadType === 0).length >= 10);
    call.send({
      type: 'reinvite',
      media: {
        codec: 'PCMA',
        payloadType: 8,
        telephoneEvent: { payloadType: 101 },
        remote: { address: '127.0.0.1', port: caller.port },
        held: false,
      },
    });
    const alaw = Array.from({ length: 10 }, (_, i) =>
      encodeAlaw(decodeUlaw(audioPayload(0x30 + i))),
    );
    await stream(caller, port, 10, {
      ssrc: 2,
      firstSeq: 500,
      firstByte: 0,
      payloadType: 8,
      payload: (i) => alaw[i] as Buffer,
    });
    await waitFor(() => caller.packets().filter((p) => p.payloadType === 8).length >= 10);
    const back = caller.packets();
    expect(back.filter((p) => p.payloadType === 0).map((p) => p.payload[0])).toEqual(
      Array.from({ length: 10 }, (_, i) => i),
    );
    expect(back.filter((p) => p.payloadType === 8).map((p) => p.payload.toString('hex'))).toEqual(
      alaw.map((b) => b.toString('hex')),
    );
  });
});

describe('when the caller of the record number presses keys by SIP INFO and RTP, then hangs up', () => {
  it('should write the audio as an A-law WAV and every digit once with its duration', async () => {
    const caller = await peer();
    const { call, port, recording, recordDir } = await answer('record', {
      codec: 'PCMA',
      payloadType: 8,
      remote: { address: '127.0.0.1', port: caller.port },
    });
    await stream(caller, port, 15, { ssrc: 3, firstSeq: 1, firstByte: 0x40, payloadType: 8 });
    call.send({ type: 'dtmf', digit: '7', durationMs: 160 });
    call.send({ type: 'dtmf', digit: 'x' });
    await sleep(100);
    call.send({ type: 'ended' });
    await waitFor(() => {
      try {
        return recording().digits.length === 1;
      } catch {
        return false;
      }
    });
    const written = recording();
    expect(
      written.digits.map(({ digit, source, durationMs }) => ({ digit, source, durationMs })),
    ).toEqual([{ digit: '7', source: 'sip-info', durationMs: 160 }]);
    expect(written.audio).toMatchObject({
      encoding: 'pcma',
      sampleRate: 8000,
      frames: 15,
      concealedFrames: 0,
    });
    const wav = readWavFile(readFileSync(join(recordDir, written.audio.file)));
    expect(wav).toMatchObject({ format: 6, sampleRate: 8000, bitsPerSample: 8 });
    expect(
      wav?.data.equals(Buffer.concat(Array.from({ length: 15 }, (_, i) => audioPayload(0x40 + i)))),
    ).toBe(true);
  });
});

describe('when a recorded call lasts longer than a second while another call runs beside it', () => {
  it('should write every frame once, in order, with the bytes that were sent', async () => {
    // 120 frames cross two of the recording's once-a-second joins; the echo call beside it keeps
    // writing its own frames into the jitter buffers' shared chunks meanwhile.
    const caller = await peer();
    const other = await peer();
    const { call, port, recording, recordDir } = await answer('record', {
      remote: { address: '127.0.0.1', port: caller.port },
    });
    const echo = await answer('echo', { remote: { address: '127.0.0.1', port: other.port } });
    const payload = (i: number): Buffer =>
      Buffer.from(Array.from({ length: 160 }, (_, k) => (i * 7 + k) & 0xff));
    await Promise.all([
      stream(caller, port, 120, { ssrc: 5, firstSeq: 1, firstByte: 0, payload }),
      stream(other, echo.port, 120, { ssrc: 6, firstSeq: 1, firstByte: 0x80 }),
    ]);
    await sleep(300);
    call.send({ type: 'ended' });
    await waitFor(() => {
      try {
        return recording().audio.frames > 0;
      } catch {
        return false;
      }
    });
    const written = recording();
    expect(written.audio).toMatchObject({ encoding: 'pcmu', frames: 120, concealedFrames: 0 });
    const wav = readWavFile(readFileSync(join(recordDir, written.audio.file)));
    expect(wav?.data.equals(Buffer.concat(Array.from({ length: 120 }, (_, i) => payload(i))))).toBe(
      true,
    );
    expect(other.packets().length).toBeGreaterThan(100);
  });
});

describe('when the caller of the echo number sends no RTP at all', () => {
  it('should hang up at the media timeout', async () => {
    const caller = await peer();
    const { call } = await answer(
      'echo',
      { remote: { address: '127.0.0.1', port: caller.port } },
      1000,
    );
    await waitFor(() => call.hangups.length === 1, 3000);
    await sleep(100);
    expect(call.hangups).toHaveLength(1);
  });
});

describe('when a re-INVITE to the echo number comes from another address than the INVITE', () => {
  it('should echo to RTP from that address, and never to one no signaling named', async () => {
    const caller = await peer();
    const { call, endpoint, port } = await answer('echo', {
      remote: { address: '127.0.0.1', port: caller.port },
    });
    await stream(caller, port, 5, { ssrc: 1, firstSeq: 10, firstByte: 0 });
    await waitFor(() => caller.packets().length >= 5);
    // The re-INVITE comes from 127.0.0.6 (a proxy's other leg) and keeps the SDP's address.
    call.send({
      type: 'reinvite',
      source: '127.0.0.6',
      media: {
        codec: 'PCMU',
        payloadType: 0,
        telephoneEvent: { payloadType: 101 },
        remote: { address: '127.0.0.1', port: caller.port },
        held: false,
      },
    });
    const stranger = await RtpPeer.open(0, '127.0.0.7');
    cleanup.push(() => stranger.close());
    await stream(stranger, port, 5, { ssrc: 3, firstSeq: 300, firstByte: 0x50 });
    const moved = await RtpPeer.open(0, '127.0.0.6');
    cleanup.push(() => moved.close());
    await stream(moved, port, 10, { ssrc: 2, firstSeq: 100, firstByte: 0x20 });
    await waitFor(() => moved.packets().length >= 5);
    expect(stranger.packets()).toEqual([]);
    expect(endpoint.rtpSession.stats().dropped).toMatchObject({ 'refused-source': 5 });
  });
});
