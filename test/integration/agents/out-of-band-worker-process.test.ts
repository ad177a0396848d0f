/**
 * Out-of-band messages sent by a worker process whose sandbox runs elsewhere (sandbox.url), as in
 * the Helm chart where the sandbox is its own Deployment: the SMS reaches the sandbox sink once.
 * Without the url the worker refuses its configuration: no tenant is promised an SMS nothing sends.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { BOOK, startHarness, type Harness } from '../../support/action-harness.ts';
import { startTs, waitFor, type StartedProcess } from '../../support/processes.ts';
import { messagesOnceSettled } from '../../support/sandbox-messages.ts';

let h: Harness;
const workers: StartedProcess[] = [];

beforeAll(async () => {
  h = await startHarness({
    tenants: { 'tenant-sms': { book_table: BOOK } },
    tenantSettings: () => ({ 'tenant-sms': { notify: { sms: 'sandbox' } } }),
    workers: false,
  });
});
afterAll(async () => {
  for (const worker of workers) worker.kill();
  await Promise.all(workers.map((w) => w.exited));
  await h.close();
});

function startWorker(configPath: string): StartedProcess {
  const worker = startTs('jobs/worker-main.ts', {
    env: {
      CALLGATE_CONFIG: configPath,
      CALLGATE_HTTP_PORT: '0',
      CALLGATE__http__operator__port: '0',
      CALLGATE_LOG_LEVEL: 'info',
      REDIS_URL: h.config.redis.url ?? '',
    },
  });
  workers.push(worker);
  return worker;
}

describe('when a worker process sends a result by SMS through a sandbox running elsewhere', () => {
  it('should deliver it to that sandbox once', async () => {
    const worker = startWorker(h.configPath);
    await waitFor(
      async () => (worker.stdout().includes('worker ready') ? true : undefined),
      30_000,
      'the worker process',
    );
    const message = {
      operationId: 'op_OOBPROC1',
      tenantId: 'tenant-sms',
      sessionId: 'sess-oob-proc',
      caller: '+15550123',
      state: 'COMMITTED',
      text: 'Your table is booked.',
      reasons: ['caller_hung_up'],
    };
    await h.layer.outOfBand.enqueue(message);
    await h.layer.outOfBand.enqueue(message);
    const sent = await messagesOnceSettled(h.sandbox.url, 'op_OOBPROC1', { timeoutMs: 15_000 });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ channel: 'sms', deliveries: 1, body: { to: '+15550123' } });
    worker.child.kill('SIGTERM');
    await worker.exited;
  });
});

describe('when no sandbox is reachable for tenants that want SMS through it', () => {
  it('should refuse the configuration at start, naming the tenant setting', async () => {
    const document = parse(readFileSync(h.configPath, 'utf8')) as {
      sandbox: Record<string, unknown>;
    };
    delete document.sandbox.url;
    const path = h.configPath.replace(/\.yaml$/, '-no-sandbox.yaml');
    writeFileSync(path, stringify(document));
    const worker = startWorker(path);
    expect(await worker.exited).toBe(2);
    expect(worker.stderr()).toContain(
      'tenants[0].notify.sms: sends SMS through the sandbox, which does not run here',
    );
    expect(worker.stdout()).not.toContain('worker ready');
  });
});
