/**
 * Realtime bridge load: N concurrent sessions of the real OpenAI client against the local
 * simulator (in a child process, so its CPU is not counted as callgate's). Each session streams
 * 20 ms μ-law frames and receives the simulator's speech (one response after another, paced in
 * real time). Prints, for callgate's process:
 *   - CPU per session (share of one core);
 *   - outbound added latency per frame: from the frame's 20 ms slot to the socket write returning
 *     (timer lateness under load plus the client's encode and send);
 *   - inbound added latency per audio delta: from the simulator handing the frame to its socket
 *     to the client emitting `audio_delta` (an upper bound: it includes loopback and the
 *     simulator's framing; both processes read the same monotonic clock).
 *
 *   npx tsx bench/realtime-bench.ts [--sessions 500] [--seconds 20] [--warmup 5] [--pin]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { WebSocketServer } from 'ws';
import { Logger } from '../config/log.ts';
import { OpenAIRealtimeSession } from '../gateway/realtime/openai-realtime-session.ts';
import { SimulatorSession } from '../gateway/realtime/simulator/simulator-session.ts';
import { loadSimulatorScript } from '../gateway/realtime/simulator/simulator-script.ts';
import { SpeechSynthesizer } from '../gateway/realtime/simulator/speech-synthesizer.ts';
import { encodeMulaw } from '../gateway/realtime/simulator/g711.ts';

/** One RTP packet of G.711 at 8 kHz. */
const FRAME_MS = 20;
const FRAME_BYTES = 160;
/**
 * The shared sender wakes this often (Node's timer granularity); a frame waits up to this long for
 * its slot. That wait belongs to the load generator, not to callgate, and is included in the
 * outbound figure, which therefore overstates callgate's share by up to about a millisecond.
 */
const TICK_MS = 1;
/** Event-loop sampling period; the histogram's values include it, so it is subtracted. */
const LOOP_RESOLUTION_MS = 10;
/** Sessions are opened in batches so the start-up burst does not dominate the warm-up. */
const CONNECT_BATCH = 50;

const quiet = new Logger({ level: 'error', sink: { write: () => undefined } });

type ChildMessage = { kind: 'ready'; url: string } | { kind: 'stamps'; stamps: Record<string, number[]>; cpuMicros: number };

function nowMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

function arg(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? Number(process.argv[index + 1]) : NaN;
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

// ---- the simulator process ------------------------------------------------------------------

async function runSimulator(): Promise<void> {
  const script = await loadSimulatorScript();
  const synthesizer = new SpeechSynthesizer();
  const stamps: Record<string, number[]> = {};
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  server.on('connection', (socket, request) => {
    const model = new URL(request.url ?? '/', 'ws://x').searchParams.get('model') ?? 'unknown';
    const sent: number[] = [];
    stamps[model] = sent;
    const session = new SimulatorSession({
      script,
      synthesizer,
      model,
      deterministic: true,
      speechSpeed: 1,
      recordWire: false,
      transport: {
        send: (text) => {
          if (socket.readyState !== socket.OPEN) return;
          // The event literal starts with its type, so this needs no parse.
          if (text.startsWith('{"type":"response.output_audio.delta"')) sent.push(nowMicros());
          socket.send(text);
        },
        close: (code, reason) => socket.close(code, reason),
      },
    });
    socket.on('message', (data: Buffer) => session.receive(data.toString('utf8')));
    socket.on('close', () => session.onTransportClosed());
  });
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as { port: number }).port;
  const started = process.cpuUsage();
  process.on('message', (message: { kind: string }) => {
    if (message.kind !== 'dump') return;
    const cpu = process.cpuUsage(started);
    const reply: ChildMessage = { kind: 'stamps', stamps, cpuMicros: cpu.user + cpu.system };
    process.send?.(reply);
  });
  const ready: ChildMessage = { kind: 'ready', url: `ws://127.0.0.1:${port}/v1/realtime` };
  process.send?.(ready);
}

// ---- callgate's side --------------------------------------------------------------------------

interface SessionProbe {
  client: OpenAIRealtimeSession;
  /** When each audio delta was emitted (µs), preallocated so that recording allocates nothing. */
  received: Float64Array;
  receivedCount: number;
}

/**
 * Latencies in 10 µs buckets up to 2 s, in one preallocated array: recording a value allocates
 * nothing, so the measurement does not add garbage collection to the tail it measures.
 */
class LatencyHistogram {
  private static readonly BUCKET_MICROS = 10;
  private readonly buckets = new Uint32Array(200_000);
  count = 0;
  maxMicros = 0;

  record(micros: number): void {
    const index = Math.min(this.buckets.length - 1, Math.max(0, Math.floor(micros / LatencyHistogram.BUCKET_MICROS)));
    this.buckets[index] = (this.buckets[index] ?? 0) + 1;
    this.count++;
    if (micros > this.maxMicros) this.maxMicros = micros;
  }

  /** The upper edge of the bucket holding the p-th percentile, in µs. */
  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const rank = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.buckets[i] ?? 0;
      if (seen >= rank) return (i + 1) * LatencyHistogram.BUCKET_MICROS;
    }
    return this.maxMicros;
  }

  describe(label: string): string {
    const ms = (v: number): string => (v / 1000).toFixed(2);
    return `${label}: n=${this.count} p50=${ms(this.percentile(50))} ms p99=${ms(this.percentile(99))} ms p99.9=${ms(this.percentile(99.9))} ms max=${ms(this.maxMicros)} ms`;
  }
}

/** Linux PSI: the share of time runnable tasks waited for a CPU (other work on a shared machine). */
function cpuPressure(): string {
  try {
    const share = /avg60=([\d.]+)/.exec(readFileSync('/proc/pressure/cpu', 'utf8'))?.[1];
    return share === undefined ? 'unknown' : `${share} % (some, 60 s)`;
  } catch {
    return 'unknown';
  }
}

/**
 * With --pin: callgate's process on CPU 0, the simulator on CPU 1 (taskset), so that the stand-in
 * for the cloud model, which in production runs elsewhere, does not compete with callgate for a
 * core. Returns false (and runs unpinned) where taskset is missing or the machine has one CPU.
 */
function pinProcesses(simulatorPid: number | undefined): boolean {
  if (simulatorPid === undefined || cpus().length < 2) return false;
  const self = spawnSync('taskset', ['-p', '-c', '0', String(process.pid)], { stdio: 'ignore' });
  const simulator = spawnSync('taskset', ['-p', '-c', '1', String(simulatorPid)], { stdio: 'ignore' });
  return self.status === 0 && simulator.status === 0;
}

/** A quiet line hum (not silence) so every frame is real μ-law audio. */
function callerFrame(): Buffer {
  const frame = Buffer.alloc(FRAME_BYTES);
  for (let i = 0; i < FRAME_BYTES; i++) frame[i] = encodeMulaw(60 * Math.sin((2 * Math.PI * 50 * i) / 8000));
  return frame;
}

async function runBench(): Promise<void> {
  const sessions = arg('sessions', 500);
  const seconds = arg('seconds', 20);
  const warmup = arg('warmup', 5);
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--simulator'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pinned = process.argv.includes('--pin') && pinProcesses(child.pid);
  const fromChild = <K extends ChildMessage['kind']>(kind: K): Promise<Extract<ChildMessage, { kind: K }>> =>
    new Promise((resolve) => {
      const onMessage = (message: ChildMessage): void => {
        if (message.kind !== kind) return;
        child.off('message', onMessage);
        resolve(message as Extract<ChildMessage, { kind: K }>);
      };
      child.on('message', onMessage);
    });
  const { url } = await fromChild('ready');
  const frame = callerFrame();
  const probes: SessionProbe[] = [];
  let measuring = false;
  const outbound = new LatencyHistogram();
  const sendCost = new LatencyHistogram();
  // Room for every delta of the run with margin: one per 20 ms.
  const receivedCapacity = Math.ceil(((warmup + seconds + 10) * 1000) / FRAME_MS) * 2;

  for (let i = 0; i < sessions; i += CONNECT_BATCH) {
    const batch = Array.from({ length: Math.min(CONNECT_BATCH, sessions - i) }, async (_, j) => {
      const client = new OpenAIRealtimeSession({ url, model: `bench-${i + j}`, logger: quiet });
      const probe: SessionProbe = { client, received: new Float64Array(receivedCapacity), receivedCount: 0 };
      client.on('audio_delta', () => {
        if (probe.receivedCount < probe.received.length) probe.received[probe.receivedCount++] = nowMicros();
      });
      client.on('response_done', () => client.createResponse());
      await client.connect();
      await client.configure({
        instructions: 'bench',
        inputFormat: 'pcmu',
        outputFormat: 'pcmu',
        // No turn detection: the caller's hum must not barge in, and the simulator skips its VAD so
        // that its process leaves the shared cores to the process being measured.
        turnDetection: null,
      });
      client.createResponse();
      probes.push(probe);
    });
    await Promise.all(batch);
  }

  // Each session sends on its own 20 ms grid, phases spread over the frame as RTP streams are; one
  // shared ticker serves them all, as the media layer's playout scheduler does.
  const gridStart = performance.now();
  const due = probes.map((_, index) => gridStart + ((index * FRAME_MS) / probes.length));
  let ticking = true;
  const tick = (): void => {
    if (!ticking) return;
    const now = performance.now();
    probes.forEach((probe, index) => {
      let slot = due[index] ?? now;
      while (slot <= now) {
        const before = performance.now();
        probe.client.sendAudio(frame);
        const after = performance.now();
        if (measuring) {
          outbound.record((after - slot) * 1000);
          sendCost.record((after - before) * 1000);
        }
        slot += FRAME_MS;
      }
      due[index] = slot;
    });
    setTimeout(tick, TICK_MS);
  };
  setTimeout(tick, TICK_MS);

  await new Promise((resolve) => setTimeout(resolve, warmup * 1000));
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  const windowStart = nowMicros();
  const cpuStart = process.cpuUsage();
  const wallStart = performance.now();
  measuring = true;
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  measuring = false;
  const cpu = process.cpuUsage(cpuStart);
  const wallMs = performance.now() - wallStart;
  const windowEnd = nowMicros();
  loopDelay.disable();

  const dumped = fromChild('stamps');
  child.send({ kind: 'dump' });
  const { stamps, cpuMicros: childCpu } = await dumped;

  ticking = false;
  const inbound = new LatencyHistogram();
  probes.forEach((probe, index) => {
    const sent = stamps[`bench-${index}`] ?? [];
    const count = Math.min(sent.length, probe.receivedCount);
    for (let k = 0; k < count; k++) {
      const sentAt = sent[k] ?? 0;
      const receivedAt = probe.received[k] ?? 0;
      if (sentAt >= windowStart && sentAt <= windowEnd) inbound.record(receivedAt - sentAt);
    }
  });
  const dropped = probes.reduce((sum, probe) => sum + probe.client.droppedAudioFrames, 0);
  const cpuShare = (cpu.user + cpu.system) / 1000 / wallMs;

  console.log(`realtime bench: ${probes.length} sessions, ${seconds} s measured after ${warmup} s warm-up`);
  console.log(`callgate CPU: ${(cpuShare * 100).toFixed(1)} % of one core total, ${((cpuShare * 100) / probes.length).toFixed(3)} % per session`);
  const messages = outbound.count + inbound.count;
  console.log(`callgate CPU per message (frame out or delta in): ${(((cpu.user + cpu.system) / Math.max(1, messages)) * 1).toFixed(1)} µs`);
  console.log(`simulator CPU (child, whole run): ${(childCpu / 1000 / 1000).toFixed(1)} s`);
  console.log(outbound.describe('outbound added latency (20 ms slot -> socket write)'));
  console.log(inbound.describe('inbound added latency (simulator send -> audio_delta emitted)'));
  const lag = (ns: number): string => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS).toFixed(2);
  console.log(`event loop lag: p50=${lag(loopDelay.percentile(50))} ms p99=${lag(loopDelay.percentile(99))} ms max=${lag(loopDelay.max)} ms`);
  console.log(sendCost.describe('client CPU per outbound frame (sendAudio)'));
  console.log(`processes: ${pinned ? 'callgate pinned to CPU 0, the simulator to CPU 1' : 'not pinned'}`);
  console.log(`machine: ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}, CPU pressure ${cpuPressure()}`);
  console.log(`frames sent per second: ${(outbound.count / seconds).toFixed(0)}; audio deltas received per second: ${(inbound.count / seconds).toFixed(0)}; dropped frames: ${dropped}`);

  await Promise.all(probes.map((probe) => probe.client.close()));
  child.kill();
}

if (process.argv.includes('--simulator')) {
  await runSimulator();
} else {
  await runBench();
}
