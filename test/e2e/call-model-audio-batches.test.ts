/**
 * Caller audio reaches the model in 60 ms batches, not one WebSocket message per 20 ms RTP frame,
 * and a key press is never overtaken: the audio the caller sent before the key reaches the model
 * before the key does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MODEL_AUDIO_BATCH_MS } from '../../gateway/call/call-session.ts';
import { waitFor } from '../support/processes.ts';
import { placeCall, type PlacedCall } from '../scenarios/place-call.ts';
import { startInProcessGateway, type InProcessGateway } from '../scenarios/in-process-gateway.ts';

const SCRIPT = {
  name: 'audio-batches',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: { '7': { say: 'Seven.' } },
};

let gateway: InProcessGateway | undefined;
let placed: PlacedCall | undefined;
afterEach(async () => {
  placed?.rtp.close();
  placed = undefined;
  await gateway?.close();
  gateway = undefined;
});

describe('when a caller is on the line', () => {
  it(
    'should send the model 60 ms of audio per message, and flush it before a key press',
    { timeout: 60_000 },
    async () => {
      const gw = await startInProcessGateway({ script: SCRIPT });
      gateway = gw;
      const call = await placeCall(gw, { holdMs: 4_000 });
      placed = call;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      call.rtp.press('7');
      await waitFor(
        async () =>
          call.model.session.heard.some((r) => r.kind === 'dtmf' && r.digit === '7')
            ? true
            : undefined,
        5_000,
        'the key at the model',
      );
      const result = await call.sipp;
      call.rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      const wire = call.model.session.wire.filter((r) => r.direction === 'in');
      const appends = wire
        .filter((r) => r.type === 'input_audio_buffer.append')
        .map((r) => Number(/<(\d+) bytes>/.exec(String(r.event.audio))?.[1]));
      // μ-law at 8 bytes per ms: full batches, except the one cut short by the key press.
      const full = MODEL_AUDIO_BATCH_MS * 8;
      expect(appends.length).toBeGreaterThan(20);
      expect(appends.filter((bytes) => bytes === full).length).toBeGreaterThanOrEqual(
        appends.length - 1,
      );
      expect(appends.every((bytes) => bytes > 0 && bytes <= full && bytes % 160 === 0)).toBe(true);
      // The key's message comes in the audio stream's order, right after the audio sent before it.
      const key = wire.findIndex(
        (r) =>
          r.type === 'conversation.item.create' &&
          JSON.stringify(r.event).includes('DTMF: the caller pressed 7'),
      );
      expect(key).toBeGreaterThan(0);
      expect(wire[key - 1]?.type).toBe('input_audio_buffer.append');
    },
  );
});
