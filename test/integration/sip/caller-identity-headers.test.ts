/**
 * The caller's identity from the INVITE to the system of record: sipp calls callgate (the product
 * process) with a P-Asserted-Identity, presses 1 by SIP INFO, the simulator books a table, and the
 * booking goes through the generic HTTP provider to a small system of record written here. One
 * tenant trusts its trunk's asserted identities, the other does not: the service sees the asserted
 * caller, verified, from the first, and From's caller, unverified, from the second.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/processes.ts';
import { startCallgate, type CallgateProcess } from '../../e2e/callgate-process.ts';
import { runSipp } from '../../e2e/sipp-runner.ts';

/** Key 1 books a table (one mutating tool call). */
const BOOKING_SCRIPT = {
  name: 'caller-identity',
  greeting: 'Hello.',
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
            name: 'Alex Morgan',
          },
        },
      ],
    },
  },
  toolOutputs: { book_table: 'Your table is {output.status|being booked}.' },
  systemMessage: 'Your table is confirmed.',
};

const TRUSTED_NUMBER = '1000';
const UNTRUSTED_NUMBER = '2000';
const LOOPBACK = ['127.0.0.1/32', '::1/128'];

interface Booking {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
}

/**
 * A system of record by the HTTP provider contract (docs/http-provider.md): POST /book commits a
 * booking once per Idempotency-Key, GET /operations/{id} looks one up.
 */
class BookingService {
  readonly requests: Booking[] = [];
  private readonly bookings = new Map<string, { operationId: string; bookingId: string }>();
  private server: Server | undefined;

  get url(): string {
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}`;
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.requests.push({ path: `${req.method} ${req.url}`, headers: req.headers });
        const reply = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (req.method === 'POST' && req.url === '/book') {
          const key = String(req.headers['idempotency-key']);
          const operationId = String(req.headers['x-callgate-operation-id']);
          const booking = this.bookings.get(key) ?? {
            operationId,
            bookingId: `bk_${this.bookings.size + 1}`,
          };
          this.bookings.set(key, booking);
          reply(200, {
            result: { booking_id: booking.bookingId },
            provider_ref: booking.bookingId,
          });
          return;
        }
        const lookup = /^\/operations\/([^/]+)$/.exec(req.url ?? '');
        const found = [...this.bookings.values()].find((b) => b.operationId === lookup?.[1]);
        if (req.method === 'GET' && found !== undefined) {
          reply(200, { status: 'committed', result: { booking_id: found.bookingId } });
          return;
        }
        reply(404, { error: { code: 'not_found', message: 'no such operation' } });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
  }

  bookingsOf(called: string): Booking[] {
    return this.requests.filter(
      (r) => r.path === 'POST /book' && r.headers['x-callgate-called'] === called,
    );
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

interface OperationRecord {
  readonly operation_id: string;
  readonly tenant_id: string;
  readonly state: string;
  readonly session_id: string;
  readonly caller?: string;
  readonly caller_verified?: boolean;
  readonly called?: string;
}

const service = new BookingService();
let callgate: CallgateProcess;

beforeAll(async () => {
  await service.start();
  callgate = await startCallgate({
    script: BOOKING_SCRIPT,
    agent: 'reservations',
    overrides: (config) => {
      const providers = config.providers as Record<string, unknown>;
      providers.records = {
        type: 'http',
        baseUrl: service.url,
        honoursIdempotencyKeys: true,
        timeoutMs: 3_000,
      };
      const tenants = config.tenants as Record<string, unknown>[];
      const trusted = tenants[0] ?? {};
      const actions = trusted.actions as Record<string, Record<string, unknown>>;
      actions.book_table = { ...actions.book_table, provider: 'records' };
      trusted.numbers = [TRUSTED_NUMBER];
      trusted.trunk = { allowFrom: LOOPBACK, trustAssertedIdentity: true };
      const untrusted = structuredClone(trusted);
      untrusted.id = 'untrusted';
      untrusted.numbers = [UNTRUSTED_NUMBER];
      untrusted.trunk = { allowFrom: LOOPBACK, trustAssertedIdentity: false };
      tenants.push(untrusted);
    },
  });
}, 60_000);

afterAll(async () => {
  await callgate.stop();
  await service.stop();
});

/** Calls `number` with the asserted-identity scenario; returns the booking the service received. */
async function callAndBook(number: string): Promise<Booking> {
  const result = await runSipp({
    scenario: 'uac-asserted-identity-info-dtmf.xml',
    port: callgate.sipPort,
    transport: 'udp',
    service: number,
    pauseMs: 3_000,
    timeoutSeconds: 30,
  });
  expect(result.exitCode, result.stderr).toBe(0);
  expect(result.firstLines).toContain('received SIP/2.0 200 OK');
  return waitFor(
    async () => service.bookingsOf(number)[0],
    15_000,
    `the booking of the call to ${number} at the system of record`,
  );
}

async function operation(id: string): Promise<OperationRecord> {
  return waitFor(
    async () => {
      const op = (await callgate.get<{ operation?: OperationRecord }>(`/v1/operations/${id}`))
        .operation;
      return op?.state === 'COMMITTED' ? op : undefined;
    },
    10_000,
    `operation ${id} to commit`,
  );
}

describe('when a trunk the tenant trusts asserts the caller in P-Asserted-Identity', () => {
  it(
    'should send the asserted caller, verified, to the system of record and record it on the operation',
    {
      timeout: 60_000,
    },
    async () => {
      const booking = await callAndBook(TRUSTED_NUMBER);

      // The service receives the tel number of the asserted identity, not From's number.
      expect(booking.headers['x-callgate-caller']).toBe('+15550123');
      expect(booking.headers['x-callgate-caller-verified']).toBe('true');
      expect(booking.headers['x-callgate-called']).toBe(TRUSTED_NUMBER);
      expect(booking.headers['x-callgate-tenant-id']).toBe('demo');
      expect(booking.headers['idempotency-key']).toMatch(/^idk_/);

      // The ledger has the same facts, so a worker needs nothing from the call.
      const op = await operation(String(booking.headers['x-callgate-operation-id']));
      expect(op).toMatchObject({
        tenant_id: 'demo',
        caller: '+15550123',
        caller_verified: true,
        called: TRUSTED_NUMBER,
      });
      expect(booking.headers['x-callgate-session-id']).toBe(op.session_id);
      expect(service.bookingsOf(TRUSTED_NUMBER)).toHaveLength(1);
    },
  );
});

describe('when a trunk the tenant does not trust asserts the caller', () => {
  it(
    'should ignore the assertion and send From’s caller, unverified',
    {
      timeout: 60_000,
    },
    async () => {
      const booking = await callAndBook(UNTRUSTED_NUMBER);

      expect(booking.headers['x-callgate-caller']).toBe('+15559999');
      expect(booking.headers['x-callgate-caller-verified']).toBe('false');
      expect(booking.headers['x-callgate-called']).toBe(UNTRUSTED_NUMBER);
      expect(booking.headers['x-callgate-tenant-id']).toBe('untrusted');

      const op = await operation(String(booking.headers['x-callgate-operation-id']));
      expect(op).toMatchObject({
        tenant_id: 'untrusted',
        caller: '+15559999',
        caller_verified: false,
        called: UNTRUSTED_NUMBER,
      });
      expect(booking.headers['x-callgate-session-id']).toBe(op.session_id);
      expect(service.bookingsOf(UNTRUSTED_NUMBER)).toHaveLength(1);
    },
  );
});
