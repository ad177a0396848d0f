/**
 * The drachtio driver, with drachtio-srf unmodified as its client, against a drachtio wire
 * protocol server (test/support/drachtio-server.ts) that bridges real SIP from sipp: OPTIONS,
 * CANCEL during the media setup, a wrong shared secret, reconnects, stop() while not connected,
 * a basic call and re-INVITEs.
 */
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { DrachtioSignalingDriver } from '../../../gateway/sip/drachtio/drachtio-driver.ts';
import type { DialogEvent, InboundCall } from '../../../gateway/sip/signaling-driver.ts';
import { closeAfterEach } from '../../support/cleanup.ts';
import { DrachtioWireServer } from '../../support/drachtio-server.ts';
import { waitFor } from '../../support/processes.ts';
import { runSipp } from '../../e2e/sipp-runner.ts';

const SECRET = 'cymru';
const RECONNECT_MS = 200;
const own = closeAfterEach();

interface Harness {
  readonly driver: DrachtioSignalingDriver;
  readonly lines: { level: string; msg: string }[];
}

function startDriver(
  port: number,
  secret: string,
  onCall: (call: InboundCall) => void = () => undefined,
): Harness {
  const lines: { level: string; msg: string }[] = [];
  const driver = new DrachtioSignalingDriver({
    sip: sipSchema.parse({
      driver: 'drachtio',
      drachtio: {
        host: '127.0.0.1',
        port,
        secretEnv: 'DRACHTIO_SECRET',
        reconnectMs: RECONNECT_MS,
      },
    }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8'] },
      }),
    ],
    logger: new Logger({
      level: 'info',
      sink: {
        write: (line) => void lines.push(JSON.parse(line) as { level: string; msg: string }),
      },
    }),
    readSecret: () => secret,
  });
  driver.onCall(onCall);
  own(driver);
  return { driver, lines };
}

async function connected(harness: Harness): Promise<void> {
  await harness.driver.start();
  await waitFor(async () => (harness.driver.readiness().ready ? true : undefined), 5_000, 'ready');
}

const LOCAL = { address: '127.0.0.1', port: 40_000 };

describe('when a trunk pings the drachtio driver with OPTIONS', () => {
  it('should register OPTIONS with drachtio-server and answer 200 with Allow', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    await connected(startDriver(server.clientPort, SECRET));
    await waitFor(
      async () => (server.routes().includes('options') ? true : undefined),
      2_000,
      'route',
    );
    const sipp = await runSipp({
      scenario: 'uac-options.xml',
      port: server.sipPort,
      transport: 'udp',
      service: '100',
    });
    // The scenario checks the Allow header itself.
    expect(sipp.exitCode, sipp.stderr).toBe(0);
    expect(sipp.firstLines).toContain('received SIP/2.0 200 OK');
  });
});

describe('when a call is carried through drachtio-server', () => {
  it('should answer with SDP, take the ACK and the caller BYE', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    const events: DialogEvent[] = [];
    await connected(
      startDriver(server.clientPort, SECRET, (call) => {
        call.dialog.on((event) => events.push(event));
        call.ring();
        expect(call.accept({ local: LOCAL }).ok).toBe(true);
      }),
    );
    const sipp = await runSipp({
      scenario: 'uac-caller-bye.xml',
      port: server.sipPort,
      transport: 'udp',
      service: '100',
    });
    expect(sipp.exitCode, sipp.stderr).toBe(0);
    const received = sipp.firstLines.filter((line) => line.startsWith('received'));
    expect(received).toEqual([
      'received SIP/2.0 100 Trying',
      'received SIP/2.0 180 Ringing',
      'received SIP/2.0 200 OK',
      'received SIP/2.0 200 OK',
    ]);
    // The 200 carried callgate's answer with its media address.
    expect(sipp.trace).toContain(`m=audio ${LOCAL.port} RTP/AVP 0 101`);
    await waitFor(
      async () => (events.some((e) => e.type === 'ended') ? true : undefined),
      2_000,
      'end',
    );
    expect(events.map((e) => e.type)).toEqual(['ack', 'bye', 'ended']);
  });
});

describe('when the caller sends re-INVITEs through drachtio-server', () => {
  it('should answer each, and report its media and where it came from', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    const events: DialogEvent[] = [];
    await connected(
      startDriver(server.clientPort, SECRET, (call) => {
        call.dialog.on((event) => events.push(event));
        expect(call.accept({ local: LOCAL }).ok).toBe(true);
      }),
    );
    const sipp = await runSipp({
      scenario: 'uac-reinvite-hold.xml',
      port: server.sipPort,
      transport: 'udp',
      service: '100',
    });
    expect(sipp.exitCode, sipp.firstLines.join('\n')).toBe(0);
    const reinvites = events.filter((e) => e.type === 'reinvite');
    // The hold (answered recvonly) and the resume, each from sipp's address, which may send the
    // media too.
    expect(reinvites.map((e) => [e.media.direction, e.media.remote.address, e.source])).toEqual([
      ['recvonly', '127.0.0.1', '127.0.0.1'],
      ['sendrecv', '127.0.0.1', '127.0.0.1'],
    ]);
  });
});

describe('when the caller cancels while the call is being set up', () => {
  it('should send no 200, and a listener subscribing after the CANCEL hears that it ended', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    const calls: { accepted: boolean; events: DialogEvent[] }[] = [];
    const CALLS = 20;
    const SETUP_MS = 1_500;
    await connected(
      startDriver(server.clientPort, SECRET, (call) => {
        const record = { accepted: false, events: [] as DialogEvent[] };
        calls.push(record);
        call.ring();
        // The media setup: the session subscribes and answers once its ports are open. Long
        // enough that every CANCEL below lands within it on a loaded machine too.
        setTimeout(() => {
          call.dialog.on((event) => record.events.push(event));
          record.accepted = call.accept({ local: LOCAL }).ok;
        }, SETUP_MS);
      }),
    );
    // CANCELs at varied delays after the 180, all inside the setup.
    const runs = await Promise.all(
      [0, 20, 50, 100, 150].map((pauseMs) =>
        runSipp({
          scenario: 'uac-cancel-after-ringing.xml',
          port: server.sipPort,
          transport: 'udp',
          service: '100',
          calls: CALLS / 5,
          rate: 50,
          pauseMs,
        }),
      ),
    );
    for (const run of runs) expect(run.exitCode, run.firstLines.join('\n')).toBe(0);
    const started = Date.now();
    await waitFor(
      async () =>
        calls.length === CALLS && calls.every((c) => c.events.some((e) => e.type === 'ended'))
          ? true
          : undefined,
      SETUP_MS + 1_000,
      'every call to end',
    );
    expect(Date.now() - started).toBeLessThan(SETUP_MS + 1_000);
    expect(calls.filter((c) => c.accepted)).toEqual([]);
    for (const call of calls)
      expect(call.events).toEqual([{ type: 'cancelled' }, { type: 'ended', reason: 'cancelled' }]);
    // drachtio-server answered each CANCEL itself; callgate never tried a 200 after it.
    expect(server.record.unknownTransactionResponses.filter((l) => l.includes(' 200 '))).toEqual(
      [],
    );
    expect(server.record.sentResponses.filter((l) => l.startsWith('200 INVITE'))).toEqual([]);
  });
});

describe('when the shared secret is wrong', () => {
  it('should log a clear error, never "connected", stay not ready, and back off', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    const harness = startDriver(server.clientPort, 'wrong');
    await harness.driver.start();
    await waitFor(
      async () => (server.record.authentications.length >= 3 ? true : undefined),
      5_000,
      'three attempts',
    );
    const readiness = harness.driver.readiness();
    expect(readiness).toEqual({
      ready: false,
      reason: `drachtio-server at 127.0.0.1:${server.clientPort} refused the shared secret`,
    });
    expect(harness.lines.some((l) => l.msg === 'connected to drachtio-server')).toBe(false);
    expect(harness.lines.filter((l) => l.level === 'error').map((l) => l.msg)).toContain(
      'drachtio-server refused the shared secret; calls cannot be taken',
    );
    // Doubling from reconnectMs: 200 then 400 ms between the attempts (srf's own loop: ~255 ms).
    const [first, second, third] = server.record.authentications.map((a) => a.at);
    expect((second ?? 0) - (first ?? 0)).toBeGreaterThanOrEqual(RECONNECT_MS - 20);
    expect((third ?? 0) - (second ?? 0)).toBeGreaterThanOrEqual(2 * RECONNECT_MS - 20);
    expect(server.record.authentications.every((a) => !a.accepted)).toBe(true);
  });
});

describe('when the drachtio-server connection is lost', () => {
  it('should flip readiness, reconnect after reconnectMs and register its verbs again', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    const harness = startDriver(server.clientPort, SECRET);
    await connected(harness);
    server.dropClients();
    await waitFor(async () => (harness.driver.readiness().ready ? undefined : true), 2_000, 'down');
    const lost = Date.now();
    await waitFor(async () => (harness.driver.readiness().ready ? true : undefined), 3_000, 'back');
    expect(Date.now() - lost).toBeGreaterThanOrEqual(RECONNECT_MS - 50);

    // drachtio-server restarting: connects are refused for a while, then it listens again.
    await server.stopListening();
    await waitFor(async () => (harness.driver.readiness().ready ? undefined : true), 2_000, 'down');
    await waitFor(
      async () =>
        harness.lines.filter((l) => l.msg === 'drachtio-server not connected, retrying').length >= 3
          ? true
          : undefined,
      5_000,
      'retries while it is down',
    );
    await server.listen();
    await waitFor(async () => (harness.driver.readiness().ready ? true : undefined), 5_000, 'back');
    await waitFor(
      async () => (server.routes().includes('options') ? true : undefined),
      2_000,
      'route',
    );
    expect(server.routes()).toEqual(expect.arrayContaining(['invite', 'options']));
  });
});

describe('when the driver stops without a connection', () => {
  it('should resolve, with no AssertionError from srf and no further attempts', async () => {
    const server = own(await DrachtioWireServer.start({ secret: SECRET }));
    await server.stopListening();
    const harness = startDriver(server.clientPort, SECRET);
    await harness.driver.start();
    await waitFor(
      async () => (harness.lines.some((l) => l.msg.includes('retrying')) ? true : undefined),
      2_000,
      'a failed attempt',
    );
    await expect(harness.driver.stop()).resolves.toBeUndefined();
    await server.listen();
    await new Promise((resolve) => setTimeout(resolve, 3 * RECONNECT_MS));
    expect(server.record.authentications).toEqual([]);
    expect(harness.driver.readiness()).toEqual({ ready: false, reason: 'stopped' });
  });
});
