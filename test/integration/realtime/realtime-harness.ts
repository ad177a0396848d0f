import { fileURLToPath } from 'node:url';
/**
 * Shared setup for the realtime integration tests: the local simulator on 127.0.0.1 port 0, the
 * real OpenAI client connected to it, a log of every event the client emitted, and caller audio
 * rendered with espeak-ng (the same synthesizer the simulator speaks with).
 */
import {
  OpenAIRealtimeSession,
  type OpenAIRealtimeSessionOptions,
} from '../../../gateway/realtime/openai-realtime-session.ts';
import type {
  RealtimeEvent,
  RealtimeEventOf,
  RealtimeEventType,
  SessionConfig,
} from '../../../gateway/realtime/realtime-session.ts';
import { MULAW_SILENCE } from '../../../gateway/realtime/simulator/g711.ts';
import {
  RealtimeSimulator,
  type RealtimeSimulatorOptions,
  type SimulatorConnection,
} from '../../../gateway/realtime/simulator/realtime-simulator.ts';
import { SpeechSynthesizer } from '../../../gateway/realtime/simulator/speech-synthesizer.ts';
import { Logger } from '../../../config/log.ts';

/** A frozen script for the protocol tests; the bundled demo script is tested on its own. */
export const PROTOCOL_SCRIPT_PATH = fileURLToPath(
  new URL('../../fixtures/realtime/protocol-script.yaml', import.meta.url),
);

/** Tests do not print the client's and simulator's logs. */
export const quietLogger = new Logger({ level: 'error', sink: { write: () => undefined } });

/** One synthesizer for all tests of a file: caller phrases are rendered once. */
export const synthesizer = new SpeechSynthesizer();

export interface Harness {
  simulator: RealtimeSimulator;
  client: OpenAIRealtimeSession;
  connection: SimulatorConnection;
  events: RealtimeEvent[];
  close(): Promise<void>;
}

export const PCMU_CONFIG: SessionConfig = {
  instructions: 'You are the Blue Harbour restaurant assistant.',
  inputFormat: 'pcmu',
  outputFormat: 'pcmu',
  turnDetection: { type: 'server_vad', silenceDurationMs: 500 },
};

export async function startHarness(
  options: {
    simulator?: RealtimeSimulatorOptions;
    client?: Partial<OpenAIRealtimeSessionOptions>;
    config?: SessionConfig | null;
  } = {},
): Promise<Harness> {
  const simulator = new RealtimeSimulator({
    deterministic: true,
    speechSpeed: 0,
    synthesizer,
    logger: quietLogger,
    scriptPath: PROTOCOL_SCRIPT_PATH,
    ...options.simulator,
  });
  const url = await simulator.start();
  const client = new OpenAIRealtimeSession({
    url,
    model: 'gpt-realtime',
    apiKey: 'sk-test-not-a-key',
    logger: quietLogger,
    ...options.client,
  });
  const events: RealtimeEvent[] = [];
  client.onAny((event) => events.push(event));
  const next = simulator.nextConnection();
  await client.connect();
  const connection = await next;
  if (options.config !== null) await client.configure(options.config ?? PCMU_CONFIG);
  return {
    simulator,
    client,
    connection,
    events,
    close: async () => {
      await client.close();
      await simulator.stop();
    },
  };
}

/** Polls until `predicate` holds; fails the test with `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  predicate: () => T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = predicate();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export function eventsOf<T extends RealtimeEventType>(
  events: readonly RealtimeEvent[],
  type: T,
): RealtimeEventOf<T>[] {
  return events.filter((event): event is RealtimeEventOf<T> => event.type === type);
}

/** What the client sent, as the simulator received it (types in order, appends left out). */
export function clientWire(connection: SimulatorConnection): string[] {
  return connection.session.receivedTypes().filter((type) => type !== 'input_audio_buffer.append');
}

/** Both directions in order, audio left out: the causal order of the conversation. */
export function conversationWire(connection: SimulatorConnection): string[] {
  return connection.session.wire
    .filter(
      (record) =>
        ![
          'input_audio_buffer.append',
          'response.output_audio.delta',
          'response.output_audio_transcript.delta',
        ].includes(record.type),
    )
    .map((record) => `${record.direction === 'in' ? '>' : '<'} ${record.type}`);
}

/** μ-law silence. */
export function silence(ms: number): Buffer {
  return Buffer.alloc(ms * 8, MULAW_SILENCE);
}

/** Caller speech: espeak-ng rendered to 8 kHz μ-law. */
export function callerSpeech(text: string): Promise<Buffer> {
  return synthesizer.render(text, 'pcmu');
}

/** Sends audio as 20 ms RTP-sized frames, as fast as the socket takes them. */
export function streamFrames(client: OpenAIRealtimeSession, audio: Buffer): void {
  for (let offset = 0; offset < audio.length; offset += 160)
    client.sendAudio(audio.subarray(offset, offset + 160));
}
