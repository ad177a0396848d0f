/**
 * An action layer for integration tests: real Redis (a unique prefix), the real sandbox over HTTP,
 * real BullMQ workers in this process (or none, when a test runs worker processes of its own).
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ulid } from 'ulid';
import { Logger } from '../../config/log.ts';
import { parseConfig } from '../../config/load.ts';
import type { Config } from '../../config/schema.ts';
import { ActionLayer } from '../../jobs/action-layer.ts';
import { createProviders } from '../../jobs/providers/registry.ts';
import type { ConversationScope } from '../../jobs/ledger/operation.ts';
import {
  startSandboxFixture,
  type SandboxFixture,
} from '../integration/providers/sandbox-fixture.ts';
import { deletePrefix, testRedis, testRedisUrl, uniquePrefix } from './redis.ts';

export const quietLog = new Logger({ level: 'error', sink: { write: () => undefined } });

export type ActionSpec = Record<string, unknown>;

export interface HarnessOptions {
  /** Actions per tenant id; every tenant gets the same providers. */
  readonly tenants: Record<string, Record<string, ActionSpec>>;
  /** Worker settings over the fast test defaults. */
  readonly worker?: Record<string, unknown>;
  /** Run BullMQ workers in this process. */
  readonly workers?: boolean;
  /** Extra settings per tenant (e.g. `notify`), given the sandbox URL. */
  readonly tenantSettings?: (sandboxUrl: string) => Record<string, Record<string, unknown>>;
  /** Extra providers (e.g. an http provider against the sandbox) by name, given the sandbox URL. */
  readonly providers?: (sandboxUrl: string) => Record<string, Record<string, unknown>>;
  /** The layer's logger (quiet by default). */
  readonly log?: Logger;
  /** A Redis of the test's own (a primary with a replica, say) instead of the run's shared one. */
  readonly redisUrl?: string;
  /** Settings of the `redis` section over the URL and prefix (e.g. `durability`). */
  readonly redis?: Record<string, unknown>;
}

export interface Harness {
  readonly config: Config;
  readonly layer: ActionLayer;
  readonly sandbox: SandboxFixture;
  readonly prefix: string;
  /** The configuration as a YAML file, for worker processes. */
  readonly configPath: string;
  scope(overrides?: Partial<ConversationScope>): ConversationScope;
  close(): Promise<void>;
}

/** Short timings so crash and stall recovery happen within a test's time. */
export const FAST_WORKER = {
  concurrency: 8,
  lockDurationMs: 1_000,
  stalledIntervalMs: 500,
  leaseTtlMs: 3_000,
  reconcileGraceMs: 1_200,
  reconcileBackoffMs: 100,
  reconcileMaxBackoffMs: 1_000,
  sweepIntervalMs: 300,
  staleAfterMs: 1_500,
};

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const sandbox = await startSandboxFixture();
  const prefix = uniquePrefix('act');
  const document = {
    redis: { url: options.redisUrl ?? testRedisUrl(), prefix, ...options.redis },
    sandbox: { enabled: false, url: sandbox.url },
    http: { port: 0 },
    sip: { udpPort: 0, tcpPort: 0 },
    log: { level: 'error' },
    worker: { ...FAST_WORKER, ...options.worker },
    providers: {
      bookings: { type: 'sandbox', service: 'bookings', baseUrl: sandbox.url, timeoutMs: 1_000 },
      payments: { type: 'sandbox', service: 'payments', baseUrl: sandbox.url, timeoutMs: 1_000 },
      ...options.providers?.(sandbox.url),
    },
    tenants: Object.entries(options.tenants).map(([id, actions], i) => ({
      id,
      numbers: [String(7000 + i)],
      agent: 'concierge',
      trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
      actions,
      ...options.tenantSettings?.(sandbox.url)[id],
    })),
  };
  // "Not found" is believed only after a grace above every provider's timeout (config validation).
  if (options.worker?.reconcileGraceMs === undefined) {
    const timeouts = Object.values(
      parseConfig({ ...document, worker: { ...document.worker, reconcileGraceMs: 3_600_000 } })
        .providers,
    ).map((p) => p.timeoutMs);
    const longest = Math.max(...timeouts);
    document.worker.reconcileGraceMs = Math.max(FAST_WORKER.reconcileGraceMs, longest + 200);
  }
  const config = parseConfig(document);
  const dir = mkdtempSync(join(tmpdir(), 'callgate-harness-'));
  const configPath = join(dir, 'callgate.yaml');
  writeFileSync(configPath, stringify(document));
  const layer = await ActionLayer.open({
    config,
    redisUrl: options.redisUrl ?? testRedisUrl(),
    log: options.log ?? quietLog,
    providers: createProviders(config),
    sandboxUrl: sandbox.url,
  });
  if (options.workers !== false) await layer.startWorkers();
  return {
    config,
    layer,
    sandbox,
    prefix,
    configPath,
    scope: (overrides = {}) => ({
      sessionId: `sess-${ulid()}`,
      ownerGateway: 'gw-test',
      turnId: 'turn-1',
      ...overrides,
    }),
    close: async () => {
      await layer.close();
      await sandbox.close();
      const redis = testRedis();
      await deletePrefix(redis, prefix);
      await deletePrefix(redis, `{${prefix}-bull}`);
      redis.disconnect();
    },
  };
}

let day = 0;
/** A booking for a slot no other test uses. */
export function booking(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  day += 1;
  const date = new Date(
    Date.UTC(2032, 0, 1) + (day + Math.floor(Math.random() * 3000)) * 86_400_000,
  )
    .toISOString()
    .slice(0, 10);
  return {
    restaurant: 'trattoria-roma',
    date,
    time: '19:00',
    party_size: 2,
    name: 'Grace Hopper',
    ...overrides,
  };
}

export const BOOK = {
  kind: 'mutation',
  provider: 'bookings',
  operation: 'book',
  policy: 'queue',
  maxConcurrent: 4,
  maxQueued: 100,
};
export const REFUND = {
  kind: 'mutation',
  provider: 'payments',
  operation: 'refund',
  policy: 'queue',
  maxConcurrent: 4,
  maxQueued: 100,
  money: true,
};
export const AVAILABILITY = {
  kind: 'read',
  provider: 'bookings',
  operation: 'availability',
  policy: 'coalesce',
  maxConcurrent: 4,
  maxQueued: 100,
};
export const CANCEL_BOOKING = {
  kind: 'mutation',
  provider: 'bookings',
  operation: 'cancel_booking',
  policy: 'queue',
  maxConcurrent: 4,
  maxQueued: 100,
};
