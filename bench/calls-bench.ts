/**
 * Whole calls under load: sipp places N concurrent calls to a fresh callgate (gateway/main.ts in
 * a child process, as `npm start` runs it: private Redis, workers, the local simulator), each
 * caller presses 1 by RFC 4733 once it has heard the greeting, the agent books a table through a
 * system of record in this process (answers in `--latency` ms), and the result is spoken back.
 * Per run it prints:
 *
 * - calls completed (sipp's successful calls) and failed (sipp's failures, plus calls whose
 *   booking was not committed and told by voice), and effects at the system of record (one per call);
 * - INVITE to 200, p50/p99: sipp's response time per call (-trace_rtt), INVITE sent to 200 received;
 * - commit to the first RTP packet of the spoken acknowledgement, p50/p99, on the wire: from the
 *   operation's COMMITTED step in the ledger to the first audible packet the caller's socket
 *   received that starts a talk spurt after the acknowledgement's response was created; beside it
 *   the gateway's own commit-to-audible (first audio of that response handed to the playout, as
 *   `callgate_commit_to_audible_seconds` records it);
 * - CPU per call: user+system time of callgate's process and its redis-server over the run,
 *   divided by the calls, and the cores that took on average; the load average.
 *
 * The callers' RTP (one socket per call, one 20 ms timer for all) runs in this process, so this
 * process competes with callgate for the same cores, as a trunk's media would not.
 *
 * Every run stops by itself: sipp gets -timeout and is killed by its PID if it overstays;
 * callgate is stopped with SIGTERM (SIGKILL after 10 s).
 *
 * Usage: flock /tmp/callgate-bench.lock npx tsx bench/calls-bench.ts [--calls 100,200] [--rate 40]
 *        [--hold 16] [--latency 2500]     (CALLS_BENCH_CPU_PROFILE=dir: a CPU profile of callgate)
 */
import { spawn } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { startFreshCallgate, type DemoTarget } from '../gateway/demo/demo-callgate.ts';
import { parseRtpPacket, serializeRtpPacket } from '../gateway/media/rtp-packet.ts';
import { freeLoopbackPort } from '../jobs/redis/local-redis.ts';
import { serializeTelephoneEvent } from '../gateway/media/telephone-event.ts';

const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const callCounts = arg('calls', '100,200').split(',').map(Number);
const rate = Number(arg('rate', '40'));
const holdMs = Number(arg('hold', '16')) * 1000;
/**
 * The system of record's answer time. Longer than the agent's two lines after the key press
 * ("Booking it.", "One moment."), so the result finds the caller and the agent silent: the
 * target (commit to audible) is for a silent line; a result that arrives while the agent talks
 * waits for it to finish, by design, and that wait is not latency.
 */
const latencyMs = Number(arg('latency', '2500'));
/** The caller presses 1 this long after the greeting started reaching it. */
const PRESS_AFTER_MS = 1_200;
const ROOT = new URL('../', import.meta.url).pathname;

const SCRIPT = {
  name: 'calls-bench',
  greeting: 'Hello, Blue Harbour.',
  fallback: 'Anything else?',
  digits: {
    '1': {
      say: 'Booking it.',
      tools: [
        {
          name: 'book_table',
          arguments: {
            restaurant: 'trattoria-roma',
            date: '2031-05-17',
            time: '19:30',
            party_size: 2,
            name: 'Bench Caller',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'One moment.' },
  systemMessage: 'Your table is confirmed.',
};

/** sipp's caller: the SDP names the port of this call's socket (-inf, one line per call). */
const SCENARIO = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="calls-bench">
  <send retrans="500"><![CDATA[
INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:+15550123@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:[service]@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: 1 INVITE
Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

v=0
o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio [field0] RTP/AVP 0 101
a=rtpmap:0 PCMU/8000
a=rtpmap:101 telephone-event/8000
a=fmtp:101 0-15
a=ptime:20
a=sendrecv
]]></send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200" rtd="true"/>
  <send><![CDATA[
ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:+15550123@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: 1 ACK
Max-Forwards: 70
Content-Length: 0

]]></send>
  <pause/>
  <send retrans="500"><![CDATA[
BYE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:+15550123@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: 2 BYE
Max-Forwards: 70
Content-Length: 0

]]></send>
  <recv response="200"/>
</scenario>
`;

// ---- the system of record ---------------------------------------------------------------------

interface BookingsProvider {
  readonly url: string;
  readonly effects: Map<string, number>;
  close(): Promise<void>;
}

async function startBookingsProvider(): Promise<BookingsProvider> {
  const effects = new Map<string, number>();
  const byKey = new Map<string, string>();
  let seq = 0;
  const body = (request: IncomingMessage): Promise<string> =>
    new Promise((resolve) => {
      let text = '';
      request.on('data', (chunk: Buffer) => (text += chunk.toString()));
      request.on('end', () => resolve(text));
    });
  const server: Server = createServer((request, response) => {
    void (async () => {
      await body(request);
      const reference = String(request.headers['x-callgate-operation-id'] ?? '');
      const reply = (status: number, payload: unknown): void => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(payload));
      };
      if (request.method === 'GET' && request.url?.startsWith('/operations/')) {
        const id = decodeURIComponent(request.url.slice('/operations/'.length));
        reply(
          effects.has(id) ? 200 : 404,
          effects.has(id)
            ? { status: 'committed', result: { booking_id: id }, provider_ref: id }
            : { status: 'not_found' },
        );
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, latencyMs));
      const key = String(request.headers['idempotency-key'] ?? reference);
      const booked = byKey.get(key) ?? `bk_${++seq}`;
      if (!byKey.has(key)) {
        byKey.set(key, booked);
        effects.set(reference, (effects.get(reference) ?? 0) + 1);
      }
      reply(201, { result: { booking_id: booked, table: 1 + (seq % 20) }, provider_ref: booked });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = address !== null && typeof address === 'object' ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    effects,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// ---- the callers' media -------------------------------------------------------------------------

interface Caller {
  readonly socket: Socket;
  readonly port: number;
  remote?: { address: string; port: number };
  firstHeardAt?: number;
  pressAt?: number;
  digitFrame: number;
  digitStart: number;
  sequence: number;
  timestamp: number;
  readonly ssrc: number;
  /** When each audible packet arrived. */
  readonly audible: number[];
}

const SILENCE = Buffer.alloc(160, 0xff);

class CallerPool {
  readonly callers: Caller[] = [];
  private timer: NodeJS.Timeout | undefined;

  static async open(count: number): Promise<CallerPool> {
    const pool = new CallerPool();
    for (let i = 0; i < count; i++) {
      const socket = createSocket('udp4');
      await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
      const caller: Caller = {
        socket,
        port: socket.address().port,
        digitFrame: -1,
        digitStart: 0,
        sequence: randomBytes(2).readUInt16BE(0),
        timestamp: randomBytes(4).readUInt32BE(0),
        ssrc: randomBytes(4).readUInt32BE(0),
        audible: [],
      };
      socket.on('message', (data, from) => pool.receive(caller, data, from.address, from.port));
      pool.callers.push(caller);
    }
    pool.timer = setInterval(() => pool.tick(), 20);
    return pool;
  }

  close(): void {
    clearInterval(this.timer);
    for (const caller of this.callers) caller.socket.close();
  }

  private receive(caller: Caller, data: Buffer, address: string, port: number): void {
    const parsed = parseRtpPacket(data);
    if (!parsed.ok) return;
    const now = Date.now();
    caller.remote ??= { address, port };
    const audible = parsed.packet.payload.some((b) => b !== 0xff && b !== 0x7f);
    if (audible) {
      caller.audible.push(now);
      caller.firstHeardAt ??= now;
      caller.pressAt ??= now + PRESS_AFTER_MS;
    }
  }

  private tick(): void {
    const now = Date.now();
    for (const caller of this.callers) {
      const remote = caller.remote;
      if (remote === undefined) continue;
      if (caller.pressAt !== undefined && now >= caller.pressAt && caller.digitFrame < 0) {
        caller.digitFrame = 0;
        caller.digitStart = caller.timestamp;
      }
      let payloadType = 0;
      let payload: Buffer = SILENCE;
      let timestamp = caller.timestamp;
      let marker = false;
      if (caller.digitFrame >= 0 && caller.digitFrame < 8) {
        payloadType = 101;
        timestamp = caller.digitStart;
        marker = caller.digitFrame === 0;
        payload = serializeTelephoneEvent({
          digit: '1',
          end: caller.digitFrame >= 5,
          volume: 10,
          duration: Math.min(caller.digitFrame + 1, 5) * 160,
        });
        caller.digitFrame++;
      }
      const packet = serializeRtpPacket({
        payloadType,
        sequenceNumber: caller.sequence,
        timestamp,
        ssrc: caller.ssrc,
        marker,
        payload,
      });
      caller.sequence = (caller.sequence + 1) & 0xffff;
      caller.timestamp = (caller.timestamp + 160) >>> 0;
      caller.socket.send(packet, remote.port, remote.address);
    }
  }
}

// ---- measuring --------------------------------------------------------------------------------

function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number),
    );
  } catch {
    return [];
  }
}

const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN);
};

async function runSipp(
  dir: string,
  sipPort: number,
  calls: number,
): Promise<{ exitCode: number | null; successful: number; failed: number; rtts: number[] }> {
  const scenario = join(dir, 'scenario.xml');
  writeFileSync(scenario, SCENARIO);
  const [localPort, mediaPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  return new Promise((resolve) => {
    const timeoutSeconds = Math.ceil(calls / rate + holdMs / 1000 + 30);
    const args = [
      `127.0.0.1:${sipPort}`,
      '-sf',
      scenario,
      '-inf',
      join(dir, 'ports.csv'),
      '-s',
      '1000',
      '-i',
      '127.0.0.1',
      '-p',
      String(localPort),
      '-mp',
      String(mediaPort),
      '-t',
      'u1',
      '-m',
      String(calls),
      '-l',
      String(calls),
      '-r',
      String(rate),
      '-d',
      String(holdMs),
      '-timeout',
      `${timeoutSeconds}s`,
      '-timeout_error',
      '-recv_timeout',
      '20000',
      '-nostdin',
      '-nr',
      '-trace_stat',
      '-stf',
      join(dir, 'stats.csv'),
      '-trace_rtt',
      '-rtt_freq',
      '1',
      '-buff_size',
      '4194304',
    ];
    const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const guard = setTimeout(
      () => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'),
      (timeoutSeconds + 15) * 1000,
    );
    child.on('close', (exitCode) => {
      clearTimeout(guard);
      if (exitCode !== 0) process.stderr.write(`sipp exited ${exitCode}: ${stderr.slice(-500)}\n`);
      const statsFile = readdirSync(dir).find(
        (name) => name.endsWith('.csv') && name.includes('stats'),
      );
      const lines =
        statsFile === undefined
          ? []
          : readFileSync(join(dir, statsFile), 'utf8').trim().split('\n');
      const header = (lines[0] ?? '').split(';');
      const last = (lines[lines.length - 1] ?? '').split(';');
      const column = (name: string): number => Number(last[header.indexOf(name)] ?? -1);
      const rttFile = readdirSync(dir).find((name) => name.includes('_rtt'));
      const rtts =
        rttFile === undefined
          ? []
          : readFileSync(join(dir, rttFile), 'utf8')
              .trim()
              .split('\n')
              .slice(1)
              .map((line) => Number(line.split(';')[1]))
              .filter(Number.isFinite);
      resolve({
        exitCode,
        successful: column('SuccessfulCall(C)'),
        failed: column('FailedCall(C)'),
        rtts,
      });
    });
  });
}

interface TimelineEntry {
  at: number;
  source: string;
  type: string;
  detail: Record<string, unknown>;
}

async function getJson<T>(url: string): Promise<T> {
  return (await (await fetch(url)).json()) as T;
}

// ---- one run ------------------------------------------------------------------------------------

async function run(calls: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-calls-bench-'));
  const provider = await startBookingsProvider();
  type Section = Record<string, unknown>;
  const config = parse(readFileSync(join(ROOT, 'config/callgate.example.yaml'), 'utf8')) as {
    model: Section;
    providers: Section;
    worker?: Section;
    tenants: { agent: string; actions: Record<string, Section> }[];
  };
  writeFileSync(join(dir, 'script.yaml'), stringify(SCRIPT));
  config.model.simulator = { script: join(dir, 'script.yaml') };
  config.providers.bench_bookings = {
    type: 'http',
    baseUrl: provider.url,
    honoursIdempotencyKeys: true,
    supportsCancel: false,
    supportsLookup: true,
    timeoutMs: 5_000,
  };
  config.worker = { concurrency: 128 };
  const tenant = config.tenants[0];
  if (tenant === undefined) throw new Error('the example configuration has no tenant');
  tenant.agent = 'reservations';
  tenant.actions.book_table = {
    ...tenant.actions.book_table,
    provider: 'bench_bookings',
    maxConcurrent: 256,
    maxQueued: 2_000,
    admissionDeadlineMs: 10_000,
  };
  writeFileSync(join(dir, 'callgate.yaml'), stringify(config));

  let target: DemoTarget | undefined;
  let pool: CallerPool | undefined;
  try {
    // CALLS_BENCH_CPU_PROFILE=<dir>: callgate writes a V8 CPU profile there when it stops.
    const profileDir = process.env.CALLS_BENCH_CPU_PROFILE;
    target = await startFreshCallgate({
      configPath: join(dir, 'callgate.yaml'),
      overrides: { CALLGATE__model__provider: 'simulator' },
      ...(profileDir !== undefined && { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] }),
    });
    const pid = target.pid ?? 0;
    // Warm-up: one call renders the script's lines (cached from then on) and warms the JIT.
    const warm = await CallerPool.open(1);
    writeFileSync(
      join(dir, 'ports.csv'),
      `SEQUENTIAL\n${warm.callers.map((c) => `${c.port};`).join('\n')}\n`,
    );
    await runSippWith(dir, target.sipPort, 1, 9_000);
    warm.close();
    provider.effects.clear();

    pool = await CallerPool.open(calls);
    writeFileSync(
      join(dir, 'ports.csv'),
      `SEQUENTIAL\n${pool.callers.map((c) => `${c.port};`).join('\n')}\n`,
    );
    const processes = [pid, ...childrenOf(pid)];
    const cpuBefore = processes.reduce((sum, p) => sum + cpuSeconds(p), 0);
    const startedAt = Date.now();
    let sipp = await runSipp(dir, target.sipPort, calls);
    // sipp that could not start (its port taken between the check and the bind) placed no call: once more.
    if (sipp.successful <= 0 && sipp.failed <= 0) sipp = await runSipp(dir, target.sipPort, calls);
    const wallSeconds = (Date.now() - startedAt) / 1000;
    const cpu = processes.reduce((sum, p) => sum + cpuSeconds(p), 0) - cpuBefore;
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');

    // Every booking's result settles (told, or out of band for a call that ended first).
    // A fresh callgate on loopback without tokens: its operator API is open.
    const operatorUrl = target.operatorUrl;
    const recent = async (): Promise<{ session_id: string; started_at: number }[]> =>
      (
        await getJson<{ recent: { session_id: string; started_at: number }[] }>(
          `${operatorUrl}/v1/calls?limit=500`,
        )
      ).recent.filter((c) => c.started_at >= startedAt);
    const deadline = Date.now() + 15_000;
    while ((await recent()).length < calls && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 200));
    const sessions = await recent();
    const byRtpPort = new Map(
      pool.callers.filter((c) => c.remote !== undefined).map((c) => [c.remote?.port ?? 0, c]),
    );
    const wire: number[] = [];
    const server: number[] = [];
    // Where the time goes: commit to the gate's decision, the decision to the response, the response to its first audio.
    const toGate: number[] = [];
    const toResponse: number[] = [];
    const toAudio: number[] = [];
    const decisions = new Map<string, number>();
    let told = 0;
    for (const session of sessions) {
      const { timeline } = await getJson<{ timeline: TimelineEntry[] }>(
        `${operatorUrl}/v1/calls/${session.session_id}/timeline`,
      );
      const spoken = timeline.find(
        (e) => e.type === 'result_spoken' && e.detail.status === 'completed',
      );
      const delivered = timeline.find(
        (e) => e.type === 'delivered' && e.detail.channel === 'voice',
      );
      if (spoken === undefined || delivered === undefined) continue;
      told++;
      const committedAt = timeline.find(
        (e) =>
          e.type === 'operation_committed' && e.detail.operation_id === spoken.detail.operationId,
      )?.at;
      const handed = delivered.detail.commitToAudibleMs;
      if (typeof handed !== 'number' || committedAt === undefined) continue;
      server.push(handed);
      const gate = timeline.filter(
        (e) => e.type === 'gate_decision' && e.detail.operationId === spoken.detail.operationId,
      );
      for (const g of gate)
        decisions.set(
          String(g.detail.decision),
          (decisions.get(String(g.detail.decision)) ?? 0) + 1,
        );
      const lastGate = gate[gate.length - 1];
      const createdAt = timeline.find(
        (e) =>
          e.type === 'response' &&
          e.detail.state === 'created' &&
          e.detail.responseId === spoken.detail.responseId,
      )?.at;
      if (gate[0] !== undefined) toGate.push(gate[0].at - committedAt);
      if (lastGate !== undefined && createdAt !== undefined)
        toResponse.push(createdAt - lastGate.at);
      if (createdAt !== undefined) toAudio.push(committedAt + handed - createdAt);
      // On a silent line the first packet after the acknowledgement's audio reached the playout is its first frame.
      const port = timeline.find((e) => e.type === 'answered')?.detail.rtpPort;
      const caller = typeof port === 'number' ? byRtpPort.get(port) : undefined;
      const first = caller?.audible.find((at) => at >= committedAt + handed - 1);
      if (first !== undefined) wire.push(first - committedAt);
    }
    const effects = [...provider.effects.values()];
    const duplicates = effects.filter((n) => n > 1).length;
    const failed = Math.max(0, sipp.failed) + Math.max(0, calls - told);
    const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)} ms` : '?');
    return [
      `| ${calls} | ${rate}/s, hold ${holdMs / 1000} s | ${sipp.successful} | ${failed} (sipp ${sipp.failed}, not told ${calls - told}) | ${effects.length} (${duplicates} twice) |`,
      ` ${ms(percentile(sipp.rtts, 50))} / ${ms(percentile(sipp.rtts, 99))} |`,
      ` ${ms(percentile(wire, 50))} / ${ms(percentile(wire, 99))} (n=${wire.length}) | ${ms(percentile(server, 50))} / ${ms(percentile(server, 99))} |`,
      ` ${((cpu * 1000) / calls).toFixed(0)} ms (${(cpu / wallSeconds).toFixed(2)} cores) | ${load} |`,
      `\n|   | where commit→audible goes, p50 / p99: commit→first gate decision ${ms(percentile(toGate, 50))} / ${ms(percentile(toGate, 99))}; last decision→response created ${ms(percentile(toResponse, 50))} / ${ms(percentile(toResponse, 99))}; created→first audio ${ms(percentile(toAudio, 50))} / ${ms(percentile(toAudio, 99))}; decisions ${[...decisions].map(([d, n]) => `${d} ${n}`).join(', ')} ||||||||`,
    ].join('');
  } finally {
    pool?.close();
    await target?.stop();
    await provider.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runSippWith(
  dir: string,
  sipPort: number,
  calls: number,
  hold: number,
): Promise<void> {
  const scenario = join(dir, 'scenario.xml');
  writeFileSync(scenario, SCENARIO);
  const [localPort, mediaPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  await new Promise<void>((resolve) => {
    const child = spawn(
      'sipp',
      [
        `127.0.0.1:${sipPort}`,
        '-sf',
        scenario,
        '-inf',
        join(dir, 'ports.csv'),
        '-s',
        '1000',
        '-i',
        '127.0.0.1',
        '-p',
        String(localPort),
        '-mp',
        String(mediaPort),
        '-m',
        String(calls),
        '-l',
        String(calls),
        '-d',
        String(hold),
        '-timeout',
        '30s',
        '-nostdin',
        '-nr',
      ],
      { cwd: dir, stdio: 'ignore' },
    );
    const guard = setTimeout(
      () => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'),
      45_000,
    );
    child.on('close', () => {
      clearTimeout(guard);
      resolve();
    });
  });
}

process.stdout.write(
  '| calls | rate, hold | completed | failed | bookings at the provider | INVITE→200 p50 / p99 (sipp) | commit→first RTP of the ack p50 / p99 (wire) | commit→audible p50 / p99 (gateway) | CPU per call (callgate + redis) | load avg |\n|---|---|---|---|---|---|---|---|---|---|\n',
);
for (const calls of callCounts) process.stdout.write(`${await run(calls)}\n`);
