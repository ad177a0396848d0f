/**
 * Media load benchmark (issue 6). A separate load process on loopback plays N callers, each
 * sending a 20 ms RTP stream and counting what comes back. In this process the streams go
 * through either
 *   - callgate: one RtpSession per call (passthrough to a local sink: the caller's audio is
 *     played back as a model item through the paced playout and the shared PlayoutScheduler), or
 *   - baseline: a bare Node dgram relay with one shared 20 ms timer (what Node itself can do),
 *   - srtp: callgate with SRTP (AES_CM_128_HMAC_SHA1_80 through libsrtp2) both ways; the callers
 *     send protected packets (one key for all, protected once per frame) and count what comes back,
 * for PCMU end to end, for Opus on the wire with PCMU on the model side (decode, resample,
 * encode on every frame) and for G.722 on the wire with the model's 24 kHz PCM (spandsp decode
 * and encode, 16 <-> 24 kHz resampling). Printed per run: loss (from the first packet), and after the warm-up
 * (the streams' first seconds: every session's first packets, unoptimized code, a heap growing
 * to hold the calls) p50/p99 playout lateness (measured at each send against its slot on the
 * 20 ms grid), CPU per call and per packet, collector pauses and event-loop delay.
 *
 *   npx tsx bench/media-bench.ts [--calls 250,500,1000] [--seconds 10] [--warmup 2] [--codecs pcmu,opus,g722] [--impls baseline,callgate,srtp]
 *                                [--slots 10] [--slot-capacity 100]   (callgate's send slots, for experiments)
 *                                [--rtp-sockets auto|native|node]   (callgate's RTP sockets, rtp.sockets: native module or dgram)
 *                                [--load-sockets native|node]   (the callers' sockets; native when the module is built)
 *                                [--load-processes 1]   (split the callers over this many load processes)
 *                                [--pin [--sut-cpu 0]]   (this process's main thread on that CPU, the load on the other: see pin.ts)
 *                                [--nice N]   (this process's main thread at that nice value, as gateway.nice sets the gateway's)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Logger } from '../config/log.ts';
import { z } from 'zod';
import { rtpSchema, type RtpConfig } from '../config/schema.ts';
import {
  G722,
  PCMU,
  wireCodec,
  type ModelAudioFormat,
  type WireCodec,
} from '../gateway/media/audio-format.ts';
import { decodeUlaw, encodeUlaw } from '../gateway/media/g711.ts';
import { G722_FRAME_SAMPLES, G722Codec } from '../gateway/media/g722-codec.ts';
import { MonotonicMediaTimer } from '../gateway/media/media-timer.ts';
import { nativeRtpSockets, rtpSocketsEngine } from '../gateway/media/native-rtp-sockets.ts';
import { MAX_BACKLOG_FRAMES, MAX_CATCH_UP_FRAMES } from '../gateway/media/frame-schedule.ts';
import { OPUS_FRAME_SAMPLES, OpusCodec } from '../gateway/media/opus-codec.ts';
import { PlayoutScheduler } from '../gateway/media/playout-scheduler.ts';
import { parseRtpPacket, serializeRtpPacket } from '../gateway/media/rtp-packet.ts';
import { RtpPortAllocator } from '../gateway/media/rtp-port-allocator.ts';
import { LATENESS_BIN_MS, RtpSession } from '../gateway/media/rtp-session.ts';
import { SrtpTransform, type SrtpKeys } from '../gateway/media/srtp-transform.ts';
import { argument } from './args.ts';
import { placeProcesses } from './pin.ts';

type Codec = 'pcmu' | 'opus' | 'g722';
/** Send slots per frame and their capacity (the PlayoutScheduler's defaults unless given). */
interface SchedulingOptions {
  slots?: number;
  slotCapacity?: number;
}

/** How a run is set up: callgate's scheduling and RTP sockets, and the callers' sockets. */
interface RunOptions {
  readonly scheduling: SchedulingOptions;
  readonly sockets: RtpConfig['sockets'];
  /** The callers' sockets in the load process: native (callgate's module) or dgram. */
  readonly loadNative: boolean;
}
type Impl = 'baseline' | 'callgate' | 'srtp';

const FRAME_MS = 20;
/** The load spreads its callers over the frame like real, unsynchronized phones. */
const LOAD_SLOTS = 10;
/** After the callers stop, echoes still in jitter buffers and playout queues get this long. */
const DRAIN_MS = 600;
const LATENESS_BINS = 201;
const OPUS_PT = 111;
const PAYLOAD_TYPE: Readonly<Record<Codec, number>> = { pcmu: 0, opus: OPUS_PT, g722: 9 };
/** RTP timestamp units per 20 ms: G.722's clock is 8 kHz like G.711's (RFC 3551). */
const FRAME_TIMESTAMP_UNITS: Readonly<Record<Codec, number>> = { pcmu: 160, opus: 960, g722: 160 };
/** The sessions' ports (--port-min: another run on the machine may hold the default range). */
const PORT_MIN = Number(argument('port-min', '52000'));
const PORT_MAX = PORT_MIN + 3999;
const LOAD_SSRC = 1000;

interface StartLoad {
  readonly type: 'start';
  readonly ports: number[];
  /** Index of ports[0] among all callers of the run (callers are split over load processes). */
  readonly firstIndex: number;
  readonly codec: Codec;
  /** Callers on callgate's native RTP sockets instead of dgram (--load-sockets). */
  readonly nativeSockets: boolean;
  /** Streams run this long before the measured window (see WARMUP in main). */
  readonly warmupSeconds: number;
  readonly seconds: number;
  /** SRTP master key and salt the callers protect with (the srtp impl), as bytes. */
  readonly srtpKey?: number[];
}
/** One caller's socket in the load process. */
interface Caller {
  send(packet: Buffer): void;
  close(): void;
}
interface LoadStarted {
  readonly type: 'started';
}
/** The warm-up is over: lateness, CPU and collector pauses count from here. */
interface LoadMeasuring {
  readonly type: 'measuring';
}
interface LoadDone {
  readonly type: 'done';
  readonly sent: number;
  readonly received: number;
  readonly cpuMicros: number;
}
type LoadMessage = LoadStarted | LoadMeasuring | LoadDone;

function toneFrames(count: number, rate: number, samples: number): Int16Array[] {
  return Array.from({ length: count }, (_, f) =>
    Int16Array.from({ length: samples }, (_, i) =>
      Math.round(8000 * Math.sin((2 * Math.PI * 440 * (f * samples + i)) / rate)),
    ),
  );
}

/** A second of one caller's 20 ms payloads, a 440 Hz tone. */
function callerPayloads(codec: Codec): Buffer[] {
  if (codec === 'pcmu') return toneFrames(50, 8000, 160).map((pcm) => encodeUlaw(pcm));
  if (codec === 'g722') {
    const g722 = new G722Codec();
    return toneFrames(50, 16000, G722_FRAME_SAMPLES).map((pcm) => g722.encode(pcm));
  }
  const opus = new OpusCodec();
  return toneFrames(50, 48000, OPUS_FRAME_SAMPLES).map((pcm) => opus.encode(pcm));
}

const BENCH_SUITE = 'AES_CM_128_HMAC_SHA1_80';

/** The packet as the callers send it: protected once per frame for all of them when SRTP is on. */
function protect(srtp: SrtpTransform | undefined, packet: Buffer): Buffer {
  if (srtp === undefined) return packet;
  const buffer = Buffer.alloc(packet.length + srtp.trailerBytes);
  packet.copy(buffer);
  return buffer.subarray(0, srtp.protectRtp(buffer, packet.length));
}

// ---------------------------------------------------------------------------------------------
// Load process: N callers.

async function runLoad(): Promise<void> {
  const send = (message: LoadMessage) => process.send?.(message);
  process.on('message', (raw: StartLoad) => {
    void (async () => {
      const pt = PAYLOAD_TYPE[raw.codec];
      const payloads = callerPayloads(raw.codec);
      // Every caller sends the same packet for a frame (the SSRC included: each RtpSession latches
      // its own caller by address and port), built once per frame instead of once per caller.
      const srtp =
        raw.srtpKey === undefined
          ? undefined
          : new SrtpTransform({ suite: BENCH_SUITE, localKey: Buffer.from(raw.srtpKey) });
      const framePacket = (frame: number) =>
        protect(
          srtp,
          serializeRtpPacket({
            payloadType: pt,
            marker: frame === 0,
            sequenceNumber: frame,
            timestamp: frame * FRAME_TIMESTAMP_UNITS[raw.codec],
            ssrc: LOAD_SSRC,
            payload: payloads[frame % payloads.length] as Buffer,
          }),
        );
      const sockets: Caller[] = [];
      let received = 0;
      const native = raw.nativeSockets ? nativeRtpSockets() : undefined;
      if (native instanceof Error) throw native;
      for (const port of raw.ports) {
        if (native !== undefined) {
          // The callers on callgate's native sockets, so that the load's own CPU (Node's dgram
          // costs about 1.5-2.5 µs more per datagram each way: npm run bench -- udp) is not what limits
          // the run at 1,000 calls.
          // Not connected: RTCP from the media layer to port+1 of a neighbouring caller is not
          // counted.
          const socket = native.open('127.0.0.1', 0, (_data, from) => {
            if (from.port === port) received++;
          });
          sockets.push({
            send: (packet) => socket.send(packet, port, '127.0.0.1'),
            close: () => socket.close(),
          });
          continue;
        }
        const socket = createSocket('udp4');
        await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
        // Connected like a phone to its one peer: no address lookup per send, and the kernel drops
        // anything not from the peer's RTP port (RTCP from the media layer to port+1 of a
        // neighbouring caller) without waking this process.
        await new Promise<void>((resolve) => socket.connect(port, '127.0.0.1', () => resolve()));
        socket.on('message', () => received++);
        sockets.push({ send: (packet) => socket.send(packet), close: () => socket.close() });
      }
      let cpuStart = process.cpuUsage();
      const start = performance.now() + 50;
      const measureAt = start + raw.warmupSeconds * 1000;
      let measuring = false;
      const end = measureAt + raw.seconds * 1000;
      const slotMs = FRAME_MS / LOAD_SLOTS;
      const lastStep = Math.floor((end - start) / slotMs);
      let step = 0;
      let sent = 0;
      // Frame 0 is built once: with SRTP a second protect of the same index is refused (libsrtp
      // never sends an index twice) and would go out as an empty datagram.
      let packetFrame = 0;
      let packet = framePacket(0);
      send({ type: 'started' });
      await new Promise<void>((resolve) => {
        const wake = () => {
          const now = performance.now();
          if (!measuring && now >= measureAt) {
            measuring = true;
            cpuStart = process.cpuUsage();
            send({ type: 'measuring' });
          }
          const due = Math.min(lastStep, Math.floor((now - start) / slotMs));
          // A starved load process skips what it missed, like a phone would; it never bursts.
          if (due - step > LOAD_SLOTS * 3) step = due - LOAD_SLOTS * 3;
          for (; step <= due; step++) {
            const frame = Math.floor(step / LOAD_SLOTS);
            if (frame !== packetFrame) {
              packet = framePacket(frame);
              packetFrame = frame;
            }
            // Callers keep the slot of their index over all load processes, so the spread over the
            // frame is the same however the callers are split.
            const slot = step % LOAD_SLOTS;
            const first = (((slot - raw.firstIndex) % LOAD_SLOTS) + LOAD_SLOTS) % LOAD_SLOTS;
            for (let i = first; i < sockets.length; i += LOAD_SLOTS) {
              (sockets[i] as Caller).send(packet);
              sent++;
            }
          }
          if (step > lastStep) return resolve();
          setTimeout(wake, Math.max(0, start + step * slotMs - performance.now()));
        };
        setTimeout(wake, 50);
      });
      await new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
      const cpu = process.cpuUsage(cpuStart);
      for (const socket of sockets) socket.close();
      send({ type: 'done', sent, received, cpuMicros: cpu.user + cpu.system });
    })();
  });
}

// ---------------------------------------------------------------------------------------------
// System under test: the bare relay baseline.

/**
 * The relay resolves its one address at once, as callgate's sockets do. With Node's default
 * lookup every send() of an IP literal is deferred to process.nextTick, so a frame's 1,000 writes
 * would all happen after its send loop, where the lateness measured at each send() cannot see them.
 */
function loopbackLookup(
  _hostname: string,
  _options: unknown,
  callback: (error: Error | null, address: string, family: number) => void,
): void {
  callback(null, '127.0.0.1', 4);
}

class BareRelay {
  readonly bins = new Uint32Array(LATENESS_BINS);
  /** Datagrams read plus datagrams written, for the CPU cost per packet. */
  packetsHandled = 0;
  private readonly sockets: Socket[] = [];
  private readonly queues: Buffer[][] = [];
  private readonly remotes: Array<{ port: number } | undefined> = [];
  private readonly transcoders: Array<OpusCodec | G722Codec> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly codec: Codec) {}

  async open(n: number): Promise<number[]> {
    for (let i = 0; i < n; i++) {
      const socket = createSocket({ type: 'udp4', lookup: loopbackLookup });
      await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
      this.queues.push([]);
      this.remotes.push(undefined);
      // The same libopus at 8 kHz that callgate uses: Opus on the wire, PCMU on the model side.
      if (this.codec === 'opus') this.transcoders.push(new OpusCodec({ sampleRate: 8000 }));
      // G.722 decoded and encoded again at its own 16 kHz, without the resampler callgate adds.
      if (this.codec === 'g722') this.transcoders.push(new G722Codec());
      socket.on('message', (data, from) => {
        this.packetsHandled++;
        this.remotes[i] = { port: from.port };
        const parsed = parseRtpPacket(data);
        if (!parsed.ok) return;
        let payload = parsed.packet.payload;
        const codec = this.transcoders[i];
        if (codec) {
          const pcm = codec.decode(payload);
          if (!pcm) return;
          payload = codec instanceof G722Codec ? pcm16Bytes(pcm) : encodeUlaw(pcm);
        }
        (this.queues[i] as Buffer[]).push(payload);
      });
      this.sockets.push(socket);
    }
    const start = performance.now();
    let frame = 0;
    // One shared timer; due times come from the start so the timer cannot drift. After a stall it
    // catches up like callgate's FrameSchedule: at most MAX_CATCH_UP frames per tick, and a backlog
    // beyond MAX_BACKLOG frames is skipped.
    const tick = () => {
      const due = Math.floor((performance.now() + 1 - start) / FRAME_MS);
      if (due - frame > MAX_BACKLOG_FRAMES) frame = due - MAX_CATCH_UP_FRAMES;
      const last = Math.min(due, frame + MAX_CATCH_UP_FRAMES);
      for (; frame < last;) {
        frame++;
        this.sendFrame(frame, start + frame * FRAME_MS);
      }
      this.timer = setTimeout(
        tick,
        Math.max(0, start + (frame + 1) * FRAME_MS - performance.now()),
      );
    };
    this.timer = setTimeout(tick, FRAME_MS);
    return this.sockets.map((s) => s.address().port);
  }

  private sendFrame(frame: number, dueMs: number): void {
    for (let i = 0; i < this.sockets.length; i++) {
      const remote = this.remotes[i];
      let payload = (this.queues[i] as Buffer[]).shift();
      if (!remote || !payload) continue;
      const codec = this.transcoders[i];
      if (codec instanceof G722Codec) payload = codec.encode(pcm16Samples(payload));
      else if (codec) payload = codec.encode(decodeUlaw(payload));
      const data = serializeRtpPacket({
        payloadType: PAYLOAD_TYPE[this.codec],
        sequenceNumber: frame,
        timestamp: frame * 160,
        ssrc: 7,
        payload,
      });
      // Lateness at the write, as callgate measures it (before the socket call, not after).
      const bin = Math.min(
        LATENESS_BINS - 1,
        Math.max(0, Math.floor((performance.now() - dueMs) / LATENESS_BIN_MS)),
      );
      this.bins[bin] = (this.bins[bin] as number) + 1;
      (this.sockets[i] as Socket).send(data, remote.port, '127.0.0.1');
      this.packetsHandled++;
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    await Promise.all(
      this.sockets.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
    );
  }
}

function pcm16Bytes(pcm: Int16Array): Buffer {
  return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
}

function pcm16Samples(bytes: Buffer): Int16Array {
  return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length >> 1);
}

// ---------------------------------------------------------------------------------------------
// System under test: callgate's media layer.

/** The wire codec and the model's format of a bench call: G.722 calls talk to a 24 kHz model. */
function callgateFormats(codec: Codec): { codec: WireCodec; model: ModelAudioFormat } {
  if (codec === 'pcmu') return { codec: PCMU, model: { encoding: 'pcmu' } };
  if (codec === 'g722') return { codec: G722, model: { encoding: 'pcm16', sampleRate: 24000 } };
  return { codec: wireCodec('opus', OPUS_PT), model: { encoding: 'pcmu' } };
}

class CallgateMedia {
  private readonly sessions: RtpSession[] = [];
  private readonly timer = new MonotonicMediaTimer();
  private readonly scheduler: PlayoutScheduler;
  private readonly ports = new RtpPortAllocator({ portMin: PORT_MIN, portMax: PORT_MAX });
  private readonly logger = new Logger({ level: 'error', sink: { write: () => {} } });
  sinkBytes = 0;

  private readonly sockets: RtpConfig['sockets'];

  constructor(
    private readonly codec: Codec,
    { scheduling, sockets }: RunOptions,
    private readonly srtp?: SrtpKeys,
  ) {
    this.sockets = sockets;
    this.scheduler = new PlayoutScheduler({ timer: this.timer, ...scheduling });
  }

  async open(n: number): Promise<number[]> {
    for (let i = 0; i < n; i++) {
      const session = await RtpSession.open({
        config: {
          listen: '127.0.0.1',
          portMin: PORT_MIN,
          portMax: PORT_MAX,
          mediaTimeoutMs: 600_000,
          comfortSilence: false,
          stallCutMs: 2000,
          jitterMinMs: 20,
          jitterMaxMs: 200,
          sockets: this.sockets,
        },
        ports: this.ports,
        scheduler: this.scheduler,
        timer: this.timer,
        ...callgateFormats(this.codec),
        logger: this.logger,
        ...(this.srtp !== undefined && { srtp: this.srtp }),
        // The callers send from loopback, as the INVITE's source would name it: a call's media
        // is taken only from an address its signaling names (media-source-policy.ts).
        sources: { signaling: '127.0.0.1' },
      });
      // The local sink: count what the model would get, and play it back as the model's answer.
      session.on((event) => {
        if (event.type !== 'audio') return;
        this.sinkBytes += event.audio.length;
        // Echo only what the caller sent, so packets back can be counted against packets out.
        if (!event.concealed) session.play('echo', event.audio);
      });
      this.sessions.push(session);
    }
    return this.sessions.map((s) => s.localPort);
  }

  get bins(): Uint32Array {
    const total = new Uint32Array(LATENESS_BINS);
    for (const session of this.sessions) {
      const bins = session.latenessHistogram();
      for (let i = 0; i < LATENESS_BINS; i++) total[i] = (total[i] as number) + (bins[i] as number);
    }
    return total;
  }

  /** Datagrams read plus datagrams written, for the CPU cost per packet. */
  get packetsHandled(): number {
    let total = 0;
    for (const session of this.sessions) {
      const stats = session.stats();
      total += stats.packetsIn + stats.packetsOut;
    }
    return total;
  }

  /** Where callgate's missing packets went: jitter-buffer drops, skipped send slots, underruns. */
  diagnostics(): string {
    const sum = { late: 0, discarded: 0, skipped: 0, underruns: 0, lost: 0, depthMs: 0 };
    for (const session of this.sessions) {
      const stats = session.stats();
      sum.late += stats.late;
      sum.discarded += stats.discarded;
      sum.skipped += stats.playoutSkippedFrames;
      sum.underruns += stats.receiveUnderruns;
      sum.lost += stats.lost;
      sum.depthMs += stats.jitterDepthMs;
    }
    const depth = this.sessions.length === 0 ? 0 : sum.depthMs / this.sessions.length;
    return `late ${sum.late} discarded ${sum.discarded} skipped ${sum.skipped} rx-underruns ${sum.underruns} seq-lost ${sum.lost} jitter depth ${depth.toFixed(0)} ms`;
  }

  async close(): Promise<void> {
    await Promise.all(this.sessions.map((s) => s.close()));
  }
}

// ---------------------------------------------------------------------------------------------

const CODEC_LABEL: Readonly<Record<Codec, string>> = {
  pcmu: 'PCMU',
  opus: 'Opus<->PCMU',
  g722: 'G722<->PCM24',
};

function percentile(bins: Uint32Array, p: number): number {
  let total = 0;
  for (const count of bins) total += count;
  if (total === 0) return NaN;
  let seen = 0;
  for (let i = 0; i < bins.length; i++) {
    seen += bins[i] as number;
    if (seen >= total * p) return (i + 1) * LATENESS_BIN_MS;
  }
  return bins.length * LATENESS_BIN_MS;
}

async function runOnce(
  loads: readonly ChildProcess[],
  impl: Impl,
  codec: Codec,
  calls: number,
  warmupSeconds: number,
  seconds: number,
  options: RunOptions,
): Promise<string> {
  // SRTP: callgate's key protects what it sends, the callers' key what they send.
  const srtp: SrtpKeys | undefined =
    impl === 'srtp'
      ? { suite: BENCH_SUITE, localKey: randomBytes(30), remoteKey: randomBytes(30) }
      : undefined;
  const sut = impl === 'baseline' ? new BareRelay(codec) : new CallgateMedia(codec, options, srtp);
  const ports = await sut.open(calls);
  const waitFor = (load: ChildProcess, type: LoadMessage['type']) =>
    new Promise<LoadMessage>((resolve) => {
      const check = (message: LoadMessage) => {
        if (message.type !== type) return;
        load.off('message', check);
        resolve(message);
      };
      load.on('message', check);
    });
  const started = Promise.all(loads.map((load) => waitFor(load, 'started')));
  const measuring = Promise.all(loads.map((load) => waitFor(load, 'measuring')));
  const done = Promise.all(loads.map((load) => waitFor(load, 'done')));
  // Contiguous shares of the callers, one per load process.
  const share = Math.ceil(calls / loads.length);
  loads.forEach((load, k) =>
    load.send({
      type: 'start',
      ports: ports.slice(k * share, (k + 1) * share),
      firstIndex: k * share,
      codec,
      nativeSockets: options.loadNative,
      warmupSeconds,
      seconds,
      ...(srtp?.remoteKey !== undefined && { srtpKey: [...srtp.remoteKey] }),
    } satisfies StartLoad),
  );
  await started;
  // The streams' first seconds (every session's first packets, code not yet optimized, the heap
  // growing to hold the calls: scavenges of 20-50 ms at 500 calls) are not the steady state the
  // bench measures; loss still counts from the first packet.
  await measuring;
  const binsAtStart = sut.bins.slice();
  const packetsAtStart = sut.packetsHandled;
  const cpuStart = process.cpuUsage();
  const wallStart = performance.now();
  // How late the event loop ran callbacks: past MAX_BACKLOG_FRAMES * 20 ms, playout skips frames.
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  // Collector pauses of the run: each one delays every send due while it lasts.
  const gc = { count: 0, sumMs: 0, maxMs: 0 };
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.count++;
      gc.sumMs += entry.duration;
      gc.maxMs = Math.max(gc.maxMs, entry.duration);
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const results = (await done) as LoadDone[];
  const cpu = process.cpuUsage(cpuStart);
  const wallMs = performance.now() - wallStart;
  const result = results.reduce((sum, r) => ({
    type: 'done' as const,
    sent: sum.sent + r.sent,
    received: sum.received + r.received,
    cpuMicros: sum.cpuMicros + r.cpuMicros,
  }));
  const bins = sut.bins.map((count, i) => count - (binsAtStart[i] as number));
  loopDelay.disable();
  const loop = `loop delay p50/p99/max ${(loopDelay.percentile(50) / 1e6).toFixed(0)}/${(loopDelay.percentile(99) / 1e6).toFixed(0)}/${(loopDelay.max / 1e6).toFixed(0)} ms`;
  gcObserver.disconnect();
  // CPU per packet read or written: unlike CPU per call, it does not fall when a starved process
  // leaves packets unread in the socket, so runs on a busy machine stay comparable.
  const perPacket = `${((cpu.user + cpu.system) / Math.max(1, sut.packetsHandled - packetsAtStart)).toFixed(2)} µs/packet`;
  const cpuSplit = `${perPacket}; user/sys ${(cpu.user / 1000).toFixed(0)}/${(cpu.system / 1000).toFixed(0)} ms; gc ${gc.count} pauses, ${gc.sumMs.toFixed(0)} ms, max ${gc.maxMs.toFixed(1)} ms`;
  const diagnostics =
    sut instanceof CallgateMedia
      ? `  (${cpuSplit}; ${loop}; ${sut.diagnostics()})`
      : `  (${cpuSplit}; ${loop})`;
  await sut.close();
  const loss = result.sent === 0 ? NaN : Math.max(0, 1 - result.received / result.sent);
  const cpuPerCallPct = ((cpu.user + cpu.system) / 1000 / wallMs / calls) * 100;
  return (
    [
      impl.padEnd(9),
      CODEC_LABEL[codec].padEnd(12),
      String(calls).padStart(5),
      `${(loss * 100).toFixed(3)}%`.padStart(9),
      `${percentile(bins, 0.5).toFixed(1)}`.padStart(7),
      `${percentile(bins, 0.99).toFixed(1)}`.padStart(7),
      `${cpuPerCallPct.toFixed(4)}%`.padStart(10),
      `${(((cpu.user + cpu.system) / 1000 / wallMs) * 100).toFixed(0)}%`.padStart(6),
      `${((result.cpuMicros / 1000 / wallMs) * 100).toFixed(0)}%`.padStart(6),
      `${result.sent}/${result.received}`.padStart(16),
    ].join(' ') + diagnostics
  );
}

async function main(): Promise<void> {
  if (process.argv.includes('--role=load')) return runLoad();
  const callCounts = argument('calls', '250,500,1000').split(',').map(Number);
  const seconds = Number(argument('seconds', '10'));
  const warmupSeconds = Number(argument('warmup', '2'));
  const codecs = argument('codecs', 'pcmu,opus').split(',') as Codec[];
  const impls = argument('impls', 'baseline,callgate').split(',') as Impl[];
  const sockets = rtpSchema.shape.sockets.parse(argument('rtp-sockets', 'auto'));
  const loadSockets = z
    .enum(['native', 'node'])
    .parse(argument('load-sockets', nativeRtpSockets() instanceof Error ? 'node' : 'native'));
  const scheduling: SchedulingOptions = {};
  if (process.argv.includes('--slots')) scheduling.slots = Number(argument('slots', '10'));
  if (process.argv.includes('--slot-capacity'))
    scheduling.slotCapacity = Number(argument('slot-capacity', '100'));
  const loadProcesses = Number(argument('load-processes', '1'));
  const loads = Array.from({ length: loadProcesses }, () =>
    fork(fileURLToPath(import.meta.url), ['--role=load'], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const placement = placeProcesses(
    process.argv,
    loads.map((load) => load.pid),
    'this process (relay and callgate)',
    'the load',
  );
  const engine = rtpSocketsEngine(sockets) === undefined ? 'dgram' : 'the native module';
  console.log(
    `media bench: ${seconds} s per run measured after ${warmupSeconds} s of warm-up (loss counts from the first packet), loopback, load in pid ${loads.map((load) => load.pid).join(', ')}; callgate's RTP sockets: ${engine}, the callers': ${loadSockets === 'native' ? 'the native module' : 'dgram'}; ${placement}; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    'impl      codec        calls      loss  p50 ms  p99 ms  cpu/call  sut%  load%   sent/received',
  );
  try {
    for (const codec of codecs) {
      for (const calls of callCounts) {
        for (const impl of impls) {
          console.log(
            await runOnce(loads, impl, codec, calls, warmupSeconds, seconds, {
              scheduling,
              sockets,
              loadNative: loadSockets === 'native',
            }),
          );
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    }
  } finally {
    for (const load of loads) load.kill();
  }
}

await main();
