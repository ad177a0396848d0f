/**
 * A real sandbox on 127.0.0.1, a free port, for one test file; plus typed access to its admin
 * endpoints so tests count the side effects it actually committed.
 */
import { ulid } from 'ulid';
import type {
  SandboxEffect,
  ConcurrencyReport,
} from '../../../jobs/providers/sandbox/effect-journal.ts';
import {
  startSandbox,
  type RunningSandbox,
} from '../../../jobs/providers/sandbox/sandbox-server.ts';
import { Logger } from '../../../config/log.ts';
import type { ProviderRequest } from '../../../jobs/providers/provider.ts';

export interface SandboxFixture {
  readonly url: string;
  effects(filter?: Record<string, string>): Promise<SandboxEffect[]>;
  counts(): Promise<{ effects: Record<string, number>; requests: Record<string, number> }>;
  concurrency(): Promise<ConcurrencyReport>;
  addRule(rule: Record<string, unknown>): Promise<void>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

const quiet = new Logger({ level: 'error', sink: { write: () => undefined } });

export async function startSandboxFixture(): Promise<SandboxFixture> {
  const sandbox: RunningSandbox = await startSandbox({ host: '127.0.0.1', port: 0, log: quiet });
  const get = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${sandbox.url}${path}`);
    if (!response.ok) throw new Error(`GET ${path} answered ${response.status}`);
    return (await response.json()) as T;
  };
  const post = async (path: string, body: unknown): Promise<void> => {
    const response = await fetch(`${sandbox.url}${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
    if (!response.ok)
      throw new Error(`POST ${path} answered ${response.status}: ${await response.text()}`);
  };
  return {
    url: sandbox.url,
    effects: async (filter = {}) =>
      (
        await get<{ effects: SandboxEffect[] }>(
          `/admin/effects?${new URLSearchParams(filter).toString()}`,
        )
      ).effects,
    counts: () => get('/admin/counts'),
    concurrency: () => get('/admin/concurrency'),
    addRule: (rule) => post('/admin/faults', rule),
    reset: () => post('/admin/reset', {}),
    close: () => sandbox.close(),
  };
}

/** A provider request with fresh ids; `overrides` replace any field. */
export function providerRequest(
  operation: string,
  params: Record<string, unknown>,
  overrides: Partial<ProviderRequest> = {},
): ProviderRequest {
  const id = ulid().toLowerCase();
  return {
    operationId: `op_${id}`,
    idempotencyKey: `key_${id}`,
    tenantId: 'tenant-a',
    operation,
    params,
    signal: new AbortController().signal,
    ...overrides,
  };
}

let nextDay = 0;
/** Booking params for a slot no other test uses (a distinct date per call). */
export function freshBooking(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  nextDay += 1;
  const date = new Date(Date.UTC(2031, 0, 1) + nextDay * 86_400_000).toISOString().slice(0, 10);
  return {
    restaurant: 'trattoria-roma',
    date,
    time: '19:00',
    table: 3,
    party_size: 4,
    name: 'Ada Lovelace',
    ...overrides,
  };
}

/** Sends a raw request to the sandbox with a fault header. */
export async function rawPost(
  url: string,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
