/**
 * Translation between the provider-neutral session configuration and the OpenAI GA wire shape.
 * Pure functions, shared by the client (what it sends) and the simulator (what it reads back).
 */
import { z } from 'zod';
import type {
  AudioFormatWire,
  FunctionToolWire,
  SessionWire,
  ToolChoiceWire,
  TurnDetectionWire,
} from './openai-protocol.ts';
import type {
  AudioFormat,
  RealtimeTool,
  SessionConfig,
  ToolChoice,
  TurnDetection,
} from './realtime-session.ts';

export function formatToWire(format: AudioFormat): AudioFormatWire {
  switch (format) {
    case 'pcmu':
      return { type: 'audio/pcmu' };
    case 'pcma':
      return { type: 'audio/pcma' };
    case 'pcm24k':
      return { type: 'audio/pcm', rate: 24000 };
  }
}

export function formatFromWire(format: AudioFormatWire | undefined): AudioFormat | undefined {
  if (format === undefined) return undefined;
  switch (format.type) {
    case 'audio/pcmu':
      return 'pcmu';
    case 'audio/pcma':
      return 'pcma';
    case 'audio/pcm':
      return 'pcm24k';
  }
}

export function turnDetectionToWire(turn: TurnDetection): TurnDetectionWire {
  if (turn.type === 'semantic_vad') {
    return {
      type: 'semantic_vad',
      ...(turn.eagerness !== undefined && { eagerness: turn.eagerness }),
      ...(turn.createResponse !== undefined && { create_response: turn.createResponse }),
      ...(turn.interruptResponse !== undefined && { interrupt_response: turn.interruptResponse }),
    };
  }
  return {
    type: 'server_vad',
    ...(turn.threshold !== undefined && { threshold: turn.threshold }),
    ...(turn.prefixPaddingMs !== undefined && { prefix_padding_ms: turn.prefixPaddingMs }),
    ...(turn.silenceDurationMs !== undefined && { silence_duration_ms: turn.silenceDurationMs }),
    ...(turn.createResponse !== undefined && { create_response: turn.createResponse }),
    ...(turn.interruptResponse !== undefined && { interrupt_response: turn.interruptResponse }),
  };
}

/**
 * Tool arguments as JSON schema: the one the tool was declared with, as written (checked at load
 * against what function calling takes), else made from its zod schema; `$schema` is dropped
 * because the provider does not take it.
 */
export function toolToWire(tool: RealtimeTool): FunctionToolWire {
  const schema =
    tool.jsonSchema ?? z.toJSONSchema(tool.parameters, { io: 'input', unrepresentable: 'any' });
  const { $schema: _dropped, ...parameters } = schema;
  return { type: 'function', name: tool.name, description: tool.description, parameters };
}

export function toolChoiceToWire(choice: ToolChoice): ToolChoiceWire {
  return typeof choice === 'string' ? choice : { type: 'function', name: choice.name };
}

export interface SessionDefaults {
  voice: string;
  inputFormat: AudioFormat;
  outputFormat: AudioFormat;
}

export function sessionConfigToWire(config: SessionConfig, defaults: SessionDefaults): SessionWire {
  const turn =
    config.turnDetection === undefined
      ? undefined
      : config.turnDetection === null
        ? null
        : turnDetectionToWire(config.turnDetection);
  return {
    type: 'realtime',
    output_modalities: ['audio'],
    instructions: config.instructions,
    audio: {
      input: {
        format: formatToWire(config.inputFormat ?? defaults.inputFormat),
        ...(turn !== undefined && { turn_detection: turn }),
        ...(config.inputTranscriptionModel !== undefined && {
          transcription: { model: config.inputTranscriptionModel },
        }),
      },
      output: {
        format: formatToWire(config.outputFormat ?? defaults.outputFormat),
        voice: config.voice ?? defaults.voice,
      },
    },
    tools: (config.tools ?? []).map(toolToWire),
    tool_choice: toolChoiceToWire(config.toolChoice ?? 'auto'),
  };
}

/** Whether the server cancels its own response when the caller starts speaking (the GA default is yes). */
export function serverInterruptsResponses(session: SessionWire): boolean {
  const turn = session.audio?.input?.turn_detection;
  if (turn === undefined || turn === null) return false;
  return turn.interrupt_response ?? true;
}
