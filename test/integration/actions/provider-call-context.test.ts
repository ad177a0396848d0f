/**
 * A worker has the call without the call: every provider request of an operation (execute, the
 * reconciler's lookup and void, the retry's void, the cancel) carries the caller, whether it is
 * verified, the called number and the session, read from the operation's ledger record. Real
 * Redis; a provider that records what it was asked.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ProviderOutcomeUnknownError,
  type CancelResult,
  type LookupResult,
  type Provider,
  type ProviderCallContext,
  type ProviderRequest,
  type ProviderResult,
  type VoidResult,
} from '../../../jobs/providers/provider.ts';
import { newOperation } from '../../support/operations.ts';
import {
  ACTION_NAME,
  jobOf,
  NO_SIGNAL,
  startExecutorFixture,
  TENANT,
  type ExecutorFixture,
} from './executor-fixture.ts';

type Asked = Omit<ProviderRequest, 'params'>;

/** Loses the first answer, then turns requests away; voids and cancels whatever it is asked to. */
class RecordingProvider implements Provider {
  readonly name = 'records';
  readonly supportsCancel = true;
  readonly supportsLookup = true;
  readonly supportsVoid = true;
  readonly timeoutMs = 1_000;
  readonly asked: { readonly call: string; readonly context: ProviderCallContext | undefined }[] =
    [];

  constructor(readonly honoursIdempotencyKeys: boolean) {}

  private record(call: string, request: Asked): void {
    this.asked.push({ call, context: request.call });
  }

  async execute(request: ProviderRequest): Promise<ProviderResult> {
    this.record('execute', request);
    if (this.asked.filter((a) => a.call === 'execute').length === 1)
      throw new ProviderOutcomeUnknownError('the answer was lost');
    return { status: 'failed', retryable: true, code: 'busy', message: 'try again' };
  }

  async lookup(request: Asked): Promise<LookupResult> {
    this.record('lookup', request);
    return { status: 'not_found' };
  }

  async voidAttempts(
    request: Asked & { readonly attemptTokens: readonly string[] },
  ): Promise<VoidResult> {
    this.record('void', request);
    return { status: 'voided' };
  }

  async cancel(request: Asked): Promise<CancelResult> {
    this.record('cancel', request);
    return { status: 'cancelled' };
  }
}

let fx: ExecutorFixture | undefined;
afterEach(async () => {
  await fx?.close();
  fx = undefined;
});

const CONTEXT: ProviderCallContext = {
  sessionId: 'ses-caller-1',
  caller: '+15550123',
  callerVerified: true,
  called: '+15550100',
};

/** Admits a refund whose scope records the call; returns its id. */
async function admit(f: ExecutorFixture, provider: Provider): Promise<string> {
  const now = Date.now();
  const spec = newOperation({
    tenantId: TENANT,
    action: ACTION_NAME,
    provider: provider.name,
    providerOperation: ACTION_NAME,
    params: { order_id: 'ord_1', amount_cents: 100 },
    providerIdempotent: provider.honoursIdempotencyKeys,
    money: true,
    admissionDeadlineAt: now + 60_000,
    deadlineAt: now + 60_000,
    scope: {
      sessionId: 'ses-caller-1',
      ownerGateway: 'gw-a',
      caller: '+15550123',
      callerVerified: true,
      called: '+15550100',
    },
  });
  expect((await f.ledger.admit(spec)).type).toBe('admitted');
  return spec.operationId;
}

describe('when the reconciler and the canceller ask the provider about an operation', () => {
  it('should send the call context recorded at admission with the execute, lookup, void and cancel', async () => {
    const provider = new RecordingProvider(false);
    const f = (fx = startExecutorFixture({ provider }));
    const id = await admit(f, provider);

    expect(await f.executor().execute(jobOf(id), NO_SIGNAL)).toMatchObject({ state: 'UNKNOWN' });
    await f.reconciler.reconcile(TENANT, id, 0);
    await f.executor().execute(jobOf(id), NO_SIGNAL);
    expect(await f.canceller.process(TENANT, id)).toMatchObject({ type: 'done' });

    expect(provider.asked).toEqual(
      ['execute', 'lookup', 'void', 'execute', 'cancel'].map((call) => ({
        call,
        context: CONTEXT,
      })),
    );
    expect(await f.ledger.require(TENANT, id)).toMatchObject({
      state: 'CANCELLED',
      scope: { caller: '+15550123', callerVerified: true, called: '+15550100' },
    });
  });
});

describe('when a worker voids an uncertain attempt before it sends again', () => {
  it('should send the call context with the void and both executes', async () => {
    const provider = new RecordingProvider(true);
    const f = (fx = startExecutorFixture({ provider }));
    const id = await admit(f, provider);

    expect(await f.executor().execute(jobOf(id), NO_SIGNAL)).toMatchObject({ reason: 'retry' });
    await f.executor().execute(jobOf(id), NO_SIGNAL);

    expect(provider.asked).toEqual(
      ['execute', 'void', 'execute'].map((call) => ({ call, context: CONTEXT })),
    );
  });
});
