import { afterEach, describe, expect, it } from 'vitest';
import { REPORTED_PROTOCOL_ERRORS } from '../../../gateway/realtime/openai-realtime-session.ts';
import { eventsOf, startHarness, waitFor, type Harness } from './realtime-harness.ts';
import { protocolErrorCount } from './scripted-model-server.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** A small deterministic PRNG (mulberry32): the same bad frames on every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_VALUES: unknown[] = [null, 42, -1, '', 'x', [], {}, true, 1e308, '\u0000'];

/** Breaks a valid event: cut the text, or replace, drop or retype one field somewhere in it. */
function mutate(event: Record<string, unknown>, next: () => number): string {
  const text = JSON.stringify(event);
  const choice = next();
  if (choice < 0.25) return text.slice(0, Math.floor(next() * text.length));
  const copy = JSON.parse(text) as Record<string, unknown>;
  const keys = Object.keys(copy).filter((key) => key !== 'type');
  const key = keys[Math.floor(next() * keys.length)];
  if (key === undefined) return text;
  if (choice < 0.5) delete copy[key];
  else if (choice < 0.9) copy[key] = ODD_VALUES[Math.floor(next() * ODD_VALUES.length)];
  else copy.type = `${String(copy.type)}.x`;
  return JSON.stringify(copy);
}

describe('when the model sends hundreds of broken versions of real events', () => {
  it('should survive them with typed errors and still hold a conversation afterwards', async () => {
    // The stall bound gives a live response up (and cancels it), so it stays above the pauses of
    // the simulator's speech rendering on a loaded machine; the storm's broken events name
    // responses that are already done, which are ignored, so no phantom waits on it.
    harness = await startHarness({
      client: { responseStallTimeoutMs: 3_000, responseCreatedTimeoutMs: 300 },
    });
    const h = harness;
    // Real traffic to mutate: a greeting and a tool turn.
    h.client.on('function_call', (call) =>
      h.client.sendToolOutput(call.callId, { status: 'free' }),
    );
    h.client.createResponse();
    await waitFor('the greeting', () => eventsOf(h.events, 'response_done').length === 1);
    h.client.sendDtmf('1');
    await waitFor('the tool turn', () => eventsOf(h.events, 'response_done').length === 3);
    const samples = h.connection.session.wire
      .filter((record) => record.direction === 'out')
      .map((record) => record.event);
    const next = random(4);
    const countedBefore = await protocolErrorCount();
    for (let i = 0; i < 400; i++) {
      const sample = samples[Math.floor(next() * samples.length)];
      if (sample !== undefined) h.connection.session.sendRaw(mutate(sample, next));
    }
    const before = eventsOf(h.events, 'response_done').length;
    // Broken response.created events may have left a phantom response active: the stall bound ends it.
    h.client.createResponse();
    await waitFor(
      'a response after the storm',
      () =>
        eventsOf(h.events, 'response_done')
          .slice(before)
          .some((e) => e.status === 'completed'),
      10_000,
    );
    expect(h.client.connected).toBe(true);
    expect(eventsOf(h.events, 'disconnected')).toEqual([]);
    const codes = new Set(eventsOf(h.events, 'error').map((e) => e.code));
    // Truncated JSON alone is about a quarter of the frames: they must all have been counted, and
    // reported up to the session's limit.
    expect((await protocolErrorCount()) - countedBefore).toBeGreaterThan(80);
    expect(
      eventsOf(h.events, 'error').filter((e) => e.code === 'CALLGATE_ERR_MODEL_PROTOCOL'),
    ).toHaveLength(REPORTED_PROTOCOL_ERRORS);
    for (const code of codes)
      expect([
        'CALLGATE_ERR_MODEL_PROTOCOL',
        'CALLGATE_ERR_MODEL_TIMEOUT',
        'CALLGATE_ERR_MODEL_BAD_TOOL_ARGUMENTS',
        'CALLGATE_ERR_MODEL_REJECTED',
      ]).toContain(code);
  });
});
