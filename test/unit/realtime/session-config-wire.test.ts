import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  formatFromWire,
  formatToWire,
  serverInterruptsResponses,
  sessionConfigToWire,
  toolToWire,
} from '../../../gateway/realtime/session-config-wire.ts';
import type { AudioFormat } from '../../../gateway/realtime/realtime-session.ts';

const defaults = { voice: 'marin', inputFormat: 'pcmu', outputFormat: 'pcmu' } as const;

describe('when a session configuration is put on the wire', () => {
  it('should use the GA shape: session.type realtime, audio.input/output with format objects', () => {
    const wire = sessionConfigToWire(
      {
        instructions: 'be brief',
        inputFormat: 'pcmu',
        outputFormat: 'pcm24k',
        turnDetection: { type: 'server_vad', silenceDurationMs: 400, interruptResponse: false },
      },
      defaults,
    );
    expect(wire).toEqual({
      type: 'realtime',
      output_modalities: ['audio'],
      instructions: 'be brief',
      audio: {
        input: {
          format: { type: 'audio/pcmu' },
          turn_detection: {
            type: 'server_vad',
            silence_duration_ms: 400,
            interrupt_response: false,
          },
        },
        output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'marin' },
      },
      tools: [],
      tool_choice: 'auto',
    });
  });

  it('should send null turn detection when the call layer commits turns itself', () => {
    const wire = sessionConfigToWire({ instructions: '', turnDetection: null }, defaults);
    expect(wire.audio?.input?.turn_detection).toBeNull();
  });

  it('should send semantic_vad with eagerness and interrupt_response', () => {
    const wire = sessionConfigToWire(
      {
        instructions: '',
        turnDetection: { type: 'semantic_vad', eagerness: 'low', interruptResponse: true },
      },
      defaults,
    );
    expect(wire.audio?.input?.turn_detection).toEqual({
      type: 'semantic_vad',
      eagerness: 'low',
      interrupt_response: true,
    });
  });

  it('should name a forced tool as a function choice', () => {
    const wire = sessionConfigToWire(
      { instructions: '', toolChoice: { name: 'refund' } },
      defaults,
    );
    expect(wire.tool_choice).toEqual({ type: 'function', name: 'refund' });
  });

  it('should ask for input transcription by model name', () => {
    const wire = sessionConfigToWire(
      { instructions: '', inputTranscriptionModel: 'gpt-4o-mini-transcribe' },
      defaults,
    );
    expect(wire.audio?.input?.transcription).toEqual({ model: 'gpt-4o-mini-transcribe' });
  });
});

describe('when a tool is described with zod', () => {
  it('should send its arguments as JSON schema without $schema', () => {
    const wire = toolToWire({
      name: 'book_table',
      description: 'Books a table',
      parameters: z.object({
        date: z.string().describe('ISO date'),
        party_size: z.int().min(1).max(20),
        name: z.string().optional(),
      }),
    });
    expect(wire.type).toBe('function');
    expect(wire.name).toBe('book_table');
    expect(wire.parameters).not.toHaveProperty('$schema');
    expect(wire.parameters).toMatchObject({
      type: 'object',
      properties: {
        date: { type: 'string', description: 'ISO date' },
        party_size: { type: 'integer', minimum: 1, maximum: 20 },
      },
      required: ['date', 'party_size'],
    });
  });
});

describe('when formats travel both ways', () => {
  it.each<AudioFormat>(['pcmu', 'pcma', 'pcm24k'])('should read back %s as sent', (format) => {
    expect(formatFromWire(formatToWire(format))).toBe(format);
  });
});

describe('when deciding who cancels on barge-in', () => {
  it.each([
    [{ type: 'server_vad' as const }, true],
    [{ type: 'server_vad' as const, interrupt_response: false }, false],
    [{ type: 'semantic_vad' as const, interrupt_response: true }, true],
    [null, false],
  ])('should read turn detection %j as server-interrupts=%s', (turn, expected) => {
    expect(
      serverInterruptsResponses({ type: 'realtime', audio: { input: { turn_detection: turn } } }),
    ).toBe(expected);
  });
});
