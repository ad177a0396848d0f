/**
 * Realtime bridge load: N concurrent sessions of the real OpenAI client against the local
 * simulator (in a child process, so its CPU is not counted as callgate's). Each session streams
 * 20 ms μ-law frames and receives the simulator's speech (one response after another, paced in
 * real time). The caller side is a second child process that, like RTP reaching the media layer,
 * hands callgate each frame over a UDP socket when its 20 ms slot comes (one datagram per tick
 * naming the sessions whose frames are due), so that the generator's own timer granularity is not
 * in callgate's process. Prints, for callgate's process:
 *   - CPU per session (share of one core);
 *   - outbound added latency per frame: from the frame leaving the caller process to the socket
 *     write returning (loopback, the event loop being busy with anything else, the client's encode
 *     and send); the slot-to-write figure, which adds the caller process's own timer lateness, is
 *     printed beside it;
 *   - inbound added latency per audio delta: from the simulator handing the frame to its socket
 *     to the client emitting `audio_delta` (an upper bound: it includes loopback and the
 *     simulator's framing); printed beside it, the simulator's own part (handing the frame to ws
 *     until its socket write returned) and the rest, from that write to the emit, which is the
 *     kernel's delivery and callgate's process. All processes read the same monotonic clock;
 *   - young-generation garbage per message (from V8's heap statistics around each GC), which the
 *     noise of a shared machine moves far less than the latencies (a starved callgate handles
 *     fewer frames out per delta in, and a delta makes more garbage than a frame, so compare runs
 *     that sent all their frames).
 *
 *   npx tsx bench/realtime-bench.ts [--sessions 500] [--seconds 20] [--warmup 5] [--pin [--sut-cpu 0]] [--nice N] [--send-in-receive] [--profile DIR]
 *
 * --profile DIR writes a CPU profile and an allocation sample (every allocation, garbage
 * included) of callgate's process over the measured window only, for Chrome DevTools. They slow
 * the process down: take the numbers from runs without it. callgate's side is this process (the
 * children are started without its node flags), so node's own flags (--trace-gc-nvp, ...) go on
 * its command line: node --min-semi-space-size=16 --max-semi-space-size=16 <flags> --import tsx bench/realtime-bench.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  constants,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
} from 'node:perf_hooks';
import { GCProfiler, getHeapSpaceStatistics } from 'node:v8';
import { WebSocketServer } from 'ws';
import { Logger } from '../config/log.ts';
import { OpenAIRealtimeSession } from '../gateway/realtime/openai-realtime-session.ts';
import {
  AUDIO_CHUNK_MS,
  SimulatorSession,
} from '../gateway/realtime/simulator/simulator-session.ts';
import { loadSimulatorScript } from '../gateway/realtime/simulator/simulator-script.ts';
import { SpeechSynthesizer } from '../gateway/realtime/simulator/speech-synthesizer.ts';
import { encodeMulaw } from '../gateway/realtime/simulator/g711.ts';
import { placeProcesses } from './pin.ts';

/** One RTP packet of G.711 at 8 kHz. */
const FRAME_MS = 20;
const FRAME_BYTES = 160;
/**
 * The caller process wakes this often (Node's timer granularity) and sends the frames whose slots
 * have come; the wait for its tick is the generator's, outside callgate's process.
 */
const TICK_MS = 1;
/** Caller datagram: the send time (µs, float64) then the due sessions' indexes (uint16 each). */
const STAMP_BYTES = 8;
/** Well under a loopback datagram's limit; a caller this far behind sends the rest a tick later. */
const MAX_FRAMES_PER_DATAGRAM = 4096;
/** A millisecond in which the simulator sends more than this many deltas (all sessions) is a burst. */
const BURST_DELTAS = 25;
/** Event-loop sampling period; the histogram's values include it, so it is subtracted. */
const LOOP_RESOLUTION_MS = 10;
/** Sessions are opened in batches so the start-up burst does not dominate the warm-up. */
const CONNECT_BATCH = 50;

const quiet = new Logger({ level: 'error', sink: { write: () => undefined } });

type ChildMessage =
  | { kind: 'ready'; url: string }
  | { kind: 'stamps'; stamps: Record<string, DeltaStamps>; cpuMicros: number }
  | { kind: 'caller-ready' }
  | { kind: 'caller-stats'; slotLatePercentiles: [number, number]; cpuMicros: number };

/** The simulator's send times of one session's audio deltas (µs): handed to ws, and ws's socket write returned. */
interface DeltaStamps {
  sent: number[];
  written: number[];
}

type ParentMessage = { kind: 'dump' } | { kind: 'call'; port: number; sessions: number };

/**
 * The monotonic clock every process of the bench shares, in µs: performance.now() (uv_hrtime less
 * this process's origin) moved onto process.hrtime's scale once, so that reading it per frame makes
 * no BigInt garbage in the process being measured.
 */
const clockOffsetMicros = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
function nowMicros(): number {
  return performance.now() * 1000 + clockOffsetMicros;
}

function arg(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? Number(process.argv[index + 1]) : NaN;
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

function textArg(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

// ---- the simulator process ------------------------------------------------------------------

async function runSimulator(): Promise<void> {
  const script = await loadSimulatorScript();
  const synthesizer = new SpeechSynthesizer();
  // The lines the sessions say, rendered before any session asks: every session waiting on one
  // first render would otherwise start speaking in the same millisecond and stay in lockstep.
  await Promise.all(
    [script.greeting, script.fallback].map((line) => synthesizer.render(line, 'pcmu')),
  );
  const stamps: Record<string, DeltaStamps> = {};
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  server.on('connection', (socket, request) => {
    const model = new URL(request.url ?? '/', 'ws://x').searchParams.get('model') ?? 'unknown';
    const delta: DeltaStamps = { sent: [], written: [] };
    stamps[model] = delta;
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
          if (!text.startsWith('{"type":"response.output_audio.delta"')) {
            socket.send(text);
            return;
          }
          delta.sent.push(nowMicros());
          // ws frames and writes the text before send returns (no compression, nothing queued).
          socket.send(text);
          delta.written.push(nowMicros());
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

// ---- the caller process ----------------------------------------------------------------------

/**
 * Sends each session's frames on its own 20 ms grid, phases spread over the frame as RTP streams
 * are: one datagram per tick, stamped when it leaves, naming the sessions whose slots have come.
 */
function runCaller(): void {
  const started = process.cpuUsage();
  const slotLate = new LatencyHistogram();
  process.on('message', (message: ParentMessage) => {
    if (message.kind === 'dump') {
      const cpu = process.cpuUsage(started);
      const reply: ChildMessage = {
        kind: 'caller-stats',
        slotLatePercentiles: [slotLate.percentile(50), slotLate.percentile(99)],
        cpuMicros: cpu.user + cpu.system,
      };
      process.send?.(reply);
      return;
    }
    if (message.kind !== 'call') return;
    const socket = createSocket('udp4');
    socket.connect(message.port, '127.0.0.1', () => {
      const gridStart = performance.now();
      const due = Array.from(
        { length: message.sessions },
        (_, index) => gridStart + (index * FRAME_MS) / message.sessions,
      );
      const tick = (): void => {
        const now = performance.now();
        // A fresh buffer each time: a datagram may still be queued when the next tick comes.
        const datagram = Buffer.allocUnsafe(STAMP_BYTES + 2 * MAX_FRAMES_PER_DATAGRAM);
        let length = STAMP_BYTES;
        for (let index = 0; index < due.length; index++) {
          let slot = due[index] ?? now;
          // Frames that do not fit go in the next tick's datagram.
          while (slot <= now && length < datagram.length) {
            datagram.writeUInt16LE(index, length);
            length += 2;
            slotLate.record((now - slot) * 1000);
            slot += FRAME_MS;
          }
          due[index] = slot;
        }
        if (length > STAMP_BYTES) {
          datagram.writeDoubleLE(nowMicros(), 0);
          socket.send(datagram.subarray(0, length));
        }
        setTimeout(tick, TICK_MS);
      };
      setTimeout(tick, TICK_MS);
      const ready: ChildMessage = { kind: 'caller-ready' };
      process.send?.(ready);
    });
  });
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
    const index = Math.min(
      this.buckets.length - 1,
      Math.max(0, Math.floor(micros / LatencyHistogram.BUCKET_MICROS)),
    );
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
 * Linux schedstat of this process's main thread (the event loop): nanoseconds on a CPU and
 * nanoseconds runnable but waiting for one. The wait is time the loop was ready to run and another
 * process had the CPU: on a shared machine it lands in the latency tail without being callgate's.
 */
function schedStat(): { runNs: number; waitNs: number } | undefined {
  try {
    const [run, wait] = readFileSync('/proc/self/schedstat', 'utf8').trim().split(' ').map(Number);
    return run === undefined || wait === undefined ? undefined : { runNs: run, waitNs: wait };
  } catch {
    return undefined;
  }
}

/** A gap between the stall monitor's ticks longer than this is a stall. */
const STALL_MS = 10;
const STALL_TICK_MS = 2;

/**
 * Where the event loop's long stalls went: each gap of more than STALL_MS between 2 ms ticks is
 * split by the main thread's schedstat into time on a CPU (callgate's own work: JavaScript, a
 * collector pause, system calls) and time runnable but waiting for one (the machine's).
 */
class StallMonitor {
  private readonly timer: NodeJS.Timeout;
  private last = performance.now();
  private lastSched = schedStat();
  stalls = 0;
  stalledMs = 0;
  runningMs = 0;
  waitingMs = 0;
  longestMs = 0;

  constructor() {
    this.timer = setInterval(() => this.tick(), STALL_TICK_MS);
  }

  private tick(): void {
    const now = performance.now();
    const sched = schedStat();
    const gap = now - this.last;
    if (gap > STALL_MS && sched !== undefined && this.lastSched !== undefined) {
      this.stalls++;
      this.stalledMs += gap;
      this.longestMs = Math.max(this.longestMs, gap);
      this.runningMs += (sched.runNs - this.lastSched.runNs) / 1e6;
      this.waitingMs += (sched.waitNs - this.lastSched.waitNs) / 1e6;
    }
    this.last = now;
    this.lastSched = sched;
  }

  stop(): string {
    clearInterval(this.timer);
    return `${this.stalls} stalls over ${STALL_MS} ms (longest ${this.longestMs.toFixed(1)} ms), ${this.stalledMs.toFixed(0)} ms in all: on a CPU ${this.runningMs.toFixed(0)} ms, waiting for one ${this.waitingMs.toFixed(0)} ms`;
  }
}

/** A quiet line hum (not silence) so every frame is real μ-law audio. */
function callerFrame(): Buffer {
  const frame = Buffer.alloc(FRAME_BYTES);
  for (let i = 0; i < FRAME_BYTES; i++)
    frame[i] = encodeMulaw(60 * Math.sin((2 * Math.PI * 50 * i) / 8000));
  return frame;
}

function startChild(role: '--simulator' | '--caller'): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), role], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

function fromChild<K extends ChildMessage['kind']>(
  child: ChildProcess,
  kind: K,
): Promise<Extract<ChildMessage, { kind: K }>> {
  return new Promise((resolve) => {
    const onMessage = (message: ChildMessage): void => {
      if (message.kind !== kind) return;
      child.off('message', onMessage);
      resolve(message as Extract<ChildMessage, { kind: K }>);
    };
    child.on('message', onMessage);
  });
}

/** The share of the simulator's deltas sent in a burst millisecond, and the most sent in one. */
function burstShare(
  stamps: Record<string, DeltaStamps>,
  fromMicros: number,
  toMicros: number,
): { share: number; largest: number } {
  const perMs = new Map<number, number>();
  let total = 0;
  for (const { sent } of Object.values(stamps)) {
    for (const at of sent) {
      if (at < fromMicros || at > toMicros) continue;
      const ms = Math.floor(at / 1000);
      perMs.set(ms, (perMs.get(ms) ?? 0) + 1);
      total++;
    }
  }
  let inBursts = 0;
  let largest = 0;
  for (const count of perMs.values()) {
    if (count > BURST_DELTAS) inBursts += count;
    largest = Math.max(largest, count);
  }
  return { share: total === 0 ? 0 : inBursts / total, largest };
}

/** New-space usage (bytes) now. */
function newSpaceUsed(): number {
  return (
    getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_used_size ?? 0
  );
}

/**
 * Bytes allocated in the young generation between `usedAtStart` and `usedAtEnd`: what each GC
 * found in new space less what the previous one left there (its survivors), plus the growth
 * after the last one. Objects too large for new space are not counted (none on the hot paths).
 */
function youngAllocation(
  statistics: ReturnType<GCProfiler['stop']>,
  usedAtStart: number,
  usedAtEnd: number,
): number {
  const newSpace = (spaces: { spaceName: string; spaceUsedSize: number }[]): number =>
    spaces.find((space) => space.spaceName === 'new_space')?.spaceUsedSize ?? 0;
  let allocated = 0;
  let left = usedAtStart;
  for (const gc of statistics?.statistics ?? []) {
    allocated += Math.max(0, newSpace(gc.beforeGC.heapSpaceStatistics) - left);
    left = newSpace(gc.afterGC.heapSpaceStatistics);
  }
  return allocated + Math.max(0, usedAtEnd - left);
}

/** CPU samples this often (µs): finer than node's default 1 ms, for a loop whose work is µs. */
const PROFILE_SAMPLE_MICROS = 200;
/** An allocation sample every this many bytes on average (V8's default, 32 KB, misses small paths). */
const PROFILE_ALLOCATION_BYTES = 4096;

/**
 * Starts profiling this process (callgate's side); the returned function stops and writes
 * realtime-<pid>.cpuprofile and realtime-<pid>.heapprofile into `dir`, and gives their paths.
 */
async function startWindowProfile(dir: string): Promise<() => Promise<string[]>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: PROFILE_SAMPLE_MICROS });
  await session.post('Profiler.start');
  // The flags keep samples of objects a GC collected: garbage is what this bench is about.
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: PROFILE_ALLOCATION_BYTES,
    includeObjectsCollectedByMinorGC: true,
    includeObjectsCollectedByMajorGC: true,
  });
  return async () => {
    const { profile: cpu } = await session.post('Profiler.stop');
    const { profile: heap } = await session.post('HeapProfiler.stopSampling');
    session.disconnect();
    mkdirSync(dir, { recursive: true });
    const paths = [
      join(dir, `realtime-${process.pid}.cpuprofile`),
      join(dir, `realtime-${process.pid}.heapprofile`),
    ];
    writeFileSync(paths[0] ?? '', JSON.stringify(cpu));
    writeFileSync(paths[1] ?? '', JSON.stringify(heap));
    return paths;
  };
}

async function runBench(): Promise<void> {
  const sessions = arg('sessions', 500);
  const seconds = arg('seconds', 20);
  const warmup = arg('warmup', 5);
  const child = startChild('--simulator');
  const caller = startChild('--caller');
  const placement = placeProcesses(
    process.argv,
    [child.pid, caller.pid],
    'callgate',
    'the simulator and the caller',
  );
  const { url } = await fromChild(child, 'ready');
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
      const probe: SessionProbe = {
        client,
        received: new Float64Array(receivedCapacity),
        receivedCount: 0,
      };
      client.on('audio_delta', () => {
        if (probe.receivedCount < probe.received.length)
          probe.received[probe.receivedCount++] = nowMicros();
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
      // Indexed by session, whatever order the connections complete in: the model name pairs a
      // session's deltas with the simulator's send times.
      probes[i + j] = probe;
    });
    await Promise.all(batch);
  }

  // Calls do not start their model's speech in the same millisecond: each session's first
  // response is asked for at its own phase of the simulator's delta period, and the next ones
  // follow on from it. (Started together, a batch of sessions keeps its deltas in lockstep, since
  // every response of the script is the same length: bursts of one delta per session at once,
  // which only the stand-in makes.)
  const speechStart = performance.now();
  probes.forEach((probe, index) => {
    const phase = speechStart + (index * AUDIO_CHUNK_MS) / probes.length;
    setTimeout(() => probe.client.createResponse(), phase - performance.now());
  });

  // Caller frames arrive over UDP, as RTP does, and are handed to the client when the loop reads
  // them; a frame waits in the socket while the loop is busy with anything else.
  const frames = createSocket('udp4');
  const sendFrames = (datagram: Buffer): void => {
    const sentAt = datagram.readDoubleLE(0);
    for (let at = STAMP_BYTES; at + 2 <= datagram.length; at += 2) {
      const probe = probes[datagram.readUInt16LE(at)];
      if (probe === undefined) continue;
      const before = nowMicros();
      probe.client.sendAudio(frame);
      const after = nowMicros();
      if (measuring) {
        outbound.record(after - sentAt);
        sendCost.record(after - before);
      }
    }
  };
  // The gateway hands caller audio to the model from the media layer's playout scheduler, not
  // inside the receive callback (gateway/media/playout-scheduler.ts; only after a stall longer than
  // the jitter buffer's maximum does the receive path hand frames over itself): frames received in
  // a loop turn are sent after that turn's reads, so the model's audio that arrived meanwhile is
  // not queued behind a burst of sends. --send-in-receive sends inside the callback instead.
  const sendInReceive = process.argv.includes('--send-in-receive');
  const received: Buffer[] = [];
  const sendReceived = (): void => {
    for (let i = 0; i < received.length; i++) sendFrames(received[i] as Buffer);
    received.length = 0;
  };
  frames.on('message', (datagram) => {
    if (sendInReceive) return sendFrames(datagram);
    if (received.push(datagram) === 1) setImmediate(sendReceived);
  });
  await new Promise<void>((resolve) => frames.bind(0, '127.0.0.1', resolve));
  const callerReady = fromChild(caller, 'caller-ready');
  const call: ParentMessage = {
    kind: 'call',
    port: frames.address().port,
    sessions: probes.length,
  };
  caller.send(call);
  await callerReady;

  await new Promise((resolve) => setTimeout(resolve, warmup * 1000));
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  const stallMonitor = new StallMonitor();
  const gcPauses = new LatencyHistogram();
  let gcTotalMs = 0;
  let gcMajor = 0;
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcPauses.record(entry.duration * 1000);
      gcTotalMs += entry.duration;
      if (
        (entry as { detail?: { kind?: number } }).detail?.kind !==
        constants.NODE_PERFORMANCE_GC_MINOR
      )
        gcMajor++;
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const profileDir = textArg('profile');
  const stopProfile = profileDir === undefined ? undefined : await startWindowProfile(profileDir);
  const gcProfiler = new GCProfiler();
  gcProfiler.start();
  const youngAtStart = newSpaceUsed();
  const windowStart = nowMicros();
  const schedStart = schedStat();
  const cpuStart = process.cpuUsage();
  const wallStart = performance.now();
  measuring = true;
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  measuring = false;
  const cpu = process.cpuUsage(cpuStart);
  const schedEnd = schedStat();
  const wallMs = performance.now() - wallStart;
  const windowEnd = nowMicros();
  const youngAtEnd = newSpaceUsed();
  const youngAllocated = youngAllocation(gcProfiler.stop(), youngAtStart, youngAtEnd);
  const profiles = await stopProfile?.();
  loopDelay.disable();
  gcObserver.disconnect();

  const dumped = fromChild(child, 'stamps');
  const callerDumped = fromChild(caller, 'caller-stats');
  const dump: ParentMessage = { kind: 'dump' };
  child.send(dump);
  caller.send(dump);
  const { stamps, cpuMicros: childCpu } = await dumped;
  const callerStats = await callerDumped;
  caller.kill();
  frames.close();
  const inbound = new LatencyHistogram();
  const simulatorSend = new LatencyHistogram();
  const afterWrite = new LatencyHistogram();
  probes.forEach((probe, index) => {
    const { sent, written } = stamps[`bench-${index}`] ?? { sent: [], written: [] };
    const count = Math.min(sent.length, probe.receivedCount);
    for (let k = 0; k < count; k++) {
      const sentAt = sent[k] ?? 0;
      const writtenAt = written[k] ?? sentAt;
      const receivedAt = probe.received[k] ?? 0;
      if (sentAt < windowStart || sentAt > windowEnd) continue;
      inbound.record(receivedAt - sentAt);
      simulatorSend.record(writtenAt - sentAt);
      afterWrite.record(receivedAt - writtenAt);
    }
  });
  const dropped = probes.reduce((sum, probe) => sum + probe.client.droppedAudioFrames, 0);
  const cpuShare = (cpu.user + cpu.system) / 1000 / wallMs;

  console.log(
    `realtime bench: ${probes.length} sessions, ${seconds} s measured after ${warmup} s warm-up`,
  );
  console.log(
    `callgate CPU: ${(cpuShare * 100).toFixed(1)} % of one core total, ${((cpuShare * 100) / probes.length).toFixed(3)} % per session`,
  );
  const messages = Math.max(1, outbound.count + inbound.count);
  console.log(
    `callgate CPU per message (frame out or delta in): ${((cpu.user + cpu.system) / messages).toFixed(1)} µs (user ${(cpu.user / messages).toFixed(1)}, system ${(cpu.system / messages).toFixed(1)})`,
  );
  console.log(
    `callgate young-generation garbage: ${(youngAllocated / 1024 / 1024 / (wallMs / 1000)).toFixed(1)} MB/s, ${(youngAllocated / messages).toFixed(0)} bytes per message`,
  );
  console.log(
    `simulator CPU (child, whole run): ${(childCpu / 1000 / 1000).toFixed(1)} s; caller process: ${(callerStats.cpuMicros / 1000 / 1000).toFixed(1)} s`,
  );
  console.log(
    outbound.describe('outbound added latency (frame sent by the caller process -> socket write)'),
  );
  const [slotP50, slotP99] = callerStats.slotLatePercentiles.map((v) => (v / 1000).toFixed(2));
  console.log(
    `  plus the caller process's own lateness (20 ms slot -> frame sent, whole run): p50=${slotP50} ms p99=${slotP99} ms`,
  );
  console.log(inbound.describe('inbound added latency (simulator send -> audio_delta emitted)'));
  console.log(
    `  of which the simulator's own send (ws framing and its socket write): ${simulatorSend.describe('').replace(/^: n=\d+ /, '')}`,
  );
  console.log(
    `  and from its socket write returning to the emit (kernel and callgate's process): ${afterWrite.describe('').replace(/^: n=\d+ /, '')}`,
  );
  const lag = (ns: number): string => Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS).toFixed(2);
  console.log(
    `event loop lag: p50=${lag(loopDelay.percentile(50))} ms p99=${lag(loopDelay.percentile(99))} ms max=${lag(loopDelay.max)} ms`,
  );
  console.log(`event loop stalls: ${stallMonitor.stop()}`);
  const newSpace = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  console.log(
    `garbage collection in the window: ${gcPauses.count} pauses (${gcMajor} not scavenges), ${gcTotalMs.toFixed(1)} ms in all, ${gcPauses.describe('pause').replace(/^pause: n=\d+ /, '')}; new space ${((newSpace?.space_size ?? 0) / 1024 / 1024).toFixed(0)} MB at the end`,
  );
  const bursts = burstShare(stamps, windowStart, windowEnd);
  console.log(
    `simulator deltas sent in a millisecond with more than ${BURST_DELTAS} deltas: ${(bursts.share * 100).toFixed(1)} % (most in one millisecond: ${bursts.largest})`,
  );
  console.log(sendCost.describe('client CPU per outbound frame (sendAudio)'));
  console.log(`processes: ${placement}`);
  if (schedStart !== undefined && schedEnd !== undefined) {
    const waitedMs = (schedEnd.waitNs - schedStart.waitNs) / 1e6;
    console.log(
      `callgate's event loop waited for a CPU (runnable, another process running): ${waitedMs.toFixed(0)} ms of the ${(wallMs / 1000).toFixed(0)} s window (${((waitedMs / wallMs) * 100).toFixed(2)} %)`,
    );
  }
  console.log(
    `machine: ${cpus().length} cores, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}, CPU pressure ${cpuPressure()}`,
  );
  if (profiles !== undefined)
    console.log(`profiles of the window (slowed by profiling): ${profiles.join(', ')}`);
  console.log(
    `frames sent per second: ${(outbound.count / seconds).toFixed(0)}; audio deltas received per second: ${(inbound.count / seconds).toFixed(0)}; dropped frames: ${dropped}`,
  );

  await Promise.all(probes.map((probe) => probe.client.close()));
  child.kill();
}

if (process.argv.includes('--simulator')) {
  await runSimulator();
} else if (process.argv.includes('--caller')) {
  runCaller();
} else {
  await runBench();
}
