/**
 * The whole gateway (gateway/main.ts in a child process) with each signaling driver, sipp as the
 * carrier: 20 calls, each CANCELled while its media is being set up. The realtime model never
 * answers its WebSocket handshake, so each call stays in its setup with its RTP ports open until
 * the CANCEL; the CANCELs come with the INVITE or at varied delays after the 180, some before the
 * call's RTP session is open and its session listens to the dialog, some after. Every CANCEL must
 * get 200 and its INVITE 487 on the wire, no call may be answered, and each call's RTP session and
 * model connection must be closed within a few seconds (not at the 30 s media timeout, nor at the
 * setup timeout). With the drachtio driver, drachtio-server (test/support/drachtio-server.ts)
 * answers the CANCEL itself, and callgate must never try the 200 after it ("Response not sent due
 * to unknown transaction").
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DrachtioWireServer, UNKNOWN_TRANSACTION } from '../support/drachtio-server.ts';
import { waitFor } from '../support/processes.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp, type SippResult } from './sipp-runner.ts';

const SCRIPT = { name: 'cancel-during-setup', greeting: 'Hello.', fallback: 'Yes?' };
const MODEL_KEY_ENV = 'CALLGATE_E2E_CANCEL_MODEL_KEY';
const DRACHTIO_SECRET = 'cymru';
const CALLS = 20;
/**
 * One sipp run each: when its CANCELs go. Sent with the INVITE (before any response), they land
 * before the call's RTP session is open and its session listens to the dialog; after the 180,
 * while the model is opening with the RTP ports taken.
 */
const CANCEL_RUNS = [
  { scenario: 'uac-cancel-at-once.xml', pauseMs: 0 },
  { scenario: 'uac-cancel-at-once.xml', pauseMs: 0 },
  { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 0 },
  { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 20 },
  { scenario: 'uac-cancel-after-ringing.xml', pauseMs: 100 },
] as const;
const CALLS_PER_RUN = CALLS / CANCEL_RUNS.length;
/** How soon after the last CANCEL every RTP session must be closed: far below the media timeout. */
const RTP_CLOSED_WITHIN_MS = 3_000;
const MEDIA_TIMEOUT_MS = 30_000;
/** Longer than the test runs: a call left in its setup is not refused by the setup timer meanwhile. */
const SETUP_TIMEOUT_MS = 20_000;

/**
 * Where the gateway's realtime model is: it takes each connection and never answers the WebSocket
 * handshake, so each call's model session is still opening when its CANCEL comes. Counts the
 * connections (one per call whose setup reached the model) and those the gateway closed.
 */
class SilentModel {
  private readonly sockets = new Set<Socket>();
  connections = 0;
  /** Connections the gateway closed (its call's teardown closing the model session). */
  closedByGateway = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<SilentModel> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const model = new SilentModel(server, address.port);
    server.on('connection', (socket: Socket) => model.take(socket));
    return model;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}/v1/realtime`;
  }

  async close(): Promise<void> {
    const open = [...this.sockets];
    this.sockets.clear();
    for (const socket of open) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private take(socket: Socket): void {
    this.connections += 1;
    this.sockets.add(socket);
    socket.resume();
    socket.on('error', () => socket.destroy());
    socket.on('end', () => socket.end());
    socket.on('close', () => {
      if (this.sockets.delete(socket)) this.closedByGateway += 1;
    });
  }
}

/** Every sample of a metric in Prometheus text format, summed. */
function total(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (match?.[1] === name) sum += Number(match[2]);
  }
  return sum;
}

async function metrics(cg: CallgateProcess): Promise<string> {
  return (await fetch(`${cg.httpUrl}/metrics`)).text();
}

/** An even base in 30000-39990 with room for the calls' ports, away from the default range. */
function rtpRange(): { portMin: number; portMax: number } {
  const portMin = 30_000 + 100 * Math.floor(Math.random() * 99);
  return { portMin, portMax: portMin + 99 };
}

let callgate: CallgateProcess | undefined;
let model: SilentModel | undefined;
let drachtio: DrachtioWireServer | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
  await model?.close();
  model = undefined;
  await drachtio?.close();
  drachtio = undefined;
  delete process.env[MODEL_KEY_ENV];
});

interface CancelRun {
  readonly cg: CallgateProcess;
  readonly model: SilentModel;
  readonly runs: readonly SippResult[];
  /** From the last sipp run's end until no RTP session was open. */
  readonly closedAfterMs: number;
}

/** Starts callgate with `driver`, places the cancelled calls at `sipPort` (callgate's unless given). */
async function cancelDuringSetup(
  driver: 'builtin' | 'drachtio',
  sipPort?: number,
): Promise<CancelRun> {
  const silent = await SilentModel.start();
  model = silent;
  process.env[MODEL_KEY_ENV] = 'e2e-key';
  const drachtioPort = drachtio?.clientPort;
  const cg = await startCallgate({
    script: SCRIPT,
    env: { DRACHTIO_SECRET },
    overrides: (config) => {
      config.model = {
        provider: 'openai',
        openai: { url: silent.url, apiKeyEnv: MODEL_KEY_ENV },
      };
      config.rtp = {
        ...(config.rtp as Record<string, unknown>),
        ...rtpRange(),
        mediaTimeoutMs: MEDIA_TIMEOUT_MS,
      };
      config.gateway = {
        ...(config.gateway as Record<string, unknown>),
        setupTimeoutMs: SETUP_TIMEOUT_MS,
      };
      if (driver === 'drachtio')
        config.sip = {
          ...(config.sip as Record<string, unknown>),
          driver: 'drachtio',
          drachtio: { host: '127.0.0.1', port: drachtioPort, reconnectMs: 200 },
        };
    },
  });
  callgate = cg;
  const runs = await Promise.all(
    CANCEL_RUNS.map(({ scenario, pauseMs }) =>
      runSipp({
        scenario,
        port: sipPort ?? cg.sipPort,
        transport: 'udp',
        service: '1000',
        calls: CALLS_PER_RUN,
        rate: 50,
        pauseMs,
        timeoutSeconds: 15,
      }),
    ),
  );
  const cancelledAt = Date.now();
  await waitFor(
    async () => {
      const text = await metrics(cg);
      return total(text, 'callgate_rtp_sessions') === 0 &&
        total(text, 'callgate_calls_active') === 0 &&
        silent.closedByGateway === silent.connections
        ? true
        : undefined;
    },
    RTP_CLOSED_WITHIN_MS,
    'every RTP session closed',
  ).catch(async (error: unknown) => {
    const text = await metrics(cg);
    throw new Error(
      `${String(error)}: callgate_rtp_sessions ${total(text, 'callgate_rtp_sessions')}, ` +
        `callgate_calls_active ${total(text, 'callgate_calls_active')}, model connections ` +
        `${silent.connections}, closed ${silent.closedByGateway}`,
    );
  });
  return { cg, model: silent, runs, closedAfterMs: Date.now() - cancelledAt };
}

/** sipp saw, for each of its calls, the CANCEL's 200 and the INVITE's 487, and no other final response. */
function expectCancelledOnTheWire(runs: readonly SippResult[]): void {
  for (const run of runs) {
    expect(run.exitCode, run.firstLines.join('\n')).toBe(0);
    const received = run.firstLines.filter((l) => l.startsWith('received'));
    const calls = CALLS_PER_RUN;
    expect(received.filter((l) => l === 'received SIP/2.0 487 Request Terminated')).toHaveLength(
      calls,
    );
    expect(received.filter((l) => l.startsWith('received SIP/2.0 200'))).toHaveLength(calls);
    // Each 200 is the CANCEL's: none carries the INVITE's CSeq.
    const oks = run.trace
      .split(/^-{10,} .*$/m)
      .filter((message) => /received[^\n]*\n\nSIP\/2\.0 200/.test(message));
    expect(oks.map((message) => /^CSeq: (.*)$/m.exec(message)?.[1]?.trim())).toEqual(
      Array.from({ length: calls }, () => '1 CANCEL'),
    );
  }
}

async function expectNothingAnswered(run: CancelRun): Promise<void> {
  const text = await metrics(run.cg);
  expect(total(text, 'callgate_sip_calls_answered_total')).toBe(0);
  expect(total(text, 'callgate_calls_active')).toBe(0);
  expect(total(text, 'callgate_rtp_sessions')).toBe(0);
  expect(total(text, 'callgate_rtp_media_timeouts_total')).toBe(0);
  expect(run.cg.proc.output()).not.toContain(UNKNOWN_TRANSACTION);
  expect(run.cg.proc.output().toLowerCase()).not.toContain('unknown transaction');
}

describe('when calls through drachtio-server are cancelled while their media is set up', () => {
  it(
    'should end every call with 200 and 487, send no 200, and close its RTP session at once',
    { timeout: 90_000 },
    async () => {
      drachtio = await DrachtioWireServer.start({ secret: DRACHTIO_SECRET });
      const server = drachtio;
      const run = await cancelDuringSetup('drachtio', server.sipPort);
      expectCancelledOnTheWire(run.runs);
      // The calls reached their media setup: their RTP sessions were open and their model opening.
      expect(run.model.connections).toBeGreaterThan(0);
      await expectNothingAnswered(run);
      expect(server.record.relayedRequests.filter((r) => r.startsWith('CANCEL'))).toHaveLength(
        CALLS,
      );
      // drachtio-server answered each CANCEL; callgate never sent a final response after it (a 180
      // that crossed the CANCEL is refused the same way, and harmless).
      expect(
        server.record.unknownTransactionResponses.filter((l) => !/^SIP\/2\.0 1\d\d /.test(l)),
      ).toEqual([]);
      expect(server.record.sentResponses.filter((r) => r.startsWith('200 INVITE'))).toEqual([]);
      console.log(
        `drachtio cancel e2e: ${JSON.stringify({
          calls: CALLS,
          modelConnections: run.model.connections,
          modelConnectionsClosed: run.model.closedByGateway,
          rtpClosedAfterMs: run.closedAfterMs,
        })}`,
      );
    },
  );
});

describe('when calls to the built-in stack are cancelled while their media is set up', () => {
  it(
    'should end every call with 200 and 487, send no 200, and close its RTP session at once',
    { timeout: 90_000 },
    async () => {
      const run = await cancelDuringSetup('builtin');
      expectCancelledOnTheWire(run.runs);
      expect(run.model.connections).toBeGreaterThan(0);
      await expectNothingAnswered(run);
      console.log(
        `builtin cancel e2e: ${JSON.stringify({
          calls: CALLS,
          modelConnections: run.model.connections,
          modelConnectionsClosed: run.model.closedByGateway,
          rtpClosedAfterMs: run.closedAfterMs,
        })}`,
      );
    },
  );
});
