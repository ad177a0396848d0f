/**
 * Client events only the simulator understands: the side channel a test or the demo uses to play
 * the caller without audio. They are not part of the OpenAI protocol and the client never sends
 * them to the cloud; the OpenAI wire types stay in ../openai-protocol.ts.
 */

export type SimulatorClientEvent =
  /** The caller said `text` (one utterance; counts toward the script's utterance steps). */
  | { type: 'simulator.caller_said'; event_id?: string; text: string }
  /** The caller pressed a key (the script's digit steps). */
  | { type: 'simulator.dtmf'; event_id?: string; digit: string };

export const SIMULATOR_EVENT_TYPES: ReadonlySet<string> = new Set<SimulatorClientEvent['type']>([
  'simulator.caller_said',
  'simulator.dtmf',
]);
