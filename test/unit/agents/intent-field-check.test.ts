import { describe, expect, it } from 'vitest';
import { ToolRuntime, type ToolRuntimeOptions } from '../../../agents/tool-runtime.ts';
import { isCallgateError } from '../../../config/errors.ts';
import { EXAMPLE_CONFIG_PATH, loadConfig, parseConfig } from '../../../config/load.ts';
import { Logger } from '../../../config/log.ts';
import { quietLog } from '../../support/action-harness.ts';
import { exampleCatalogue } from '../../support/example-agents.ts';

/** A runtime over the example's agents and `tenants`; nothing is admitted, so no action layer is needed. */
function runtimeFor(config: ReturnType<typeof parseConfig>, log = quietLog): ToolRuntime {
  return new ToolRuntime({
    catalogue: exampleCatalogue(),
    tenants: new Map(config.tenants.map((t) => [t.id, t])),
    actions: {} as ToolRuntimeOptions['actions'],
    audit: {} as ToolRuntimeOptions['audit'],
    log,
  });
}

function withRefundIntent(intent: unknown): ReturnType<typeof parseConfig> {
  return parseConfig({
    providers: { payments: { type: 'sandbox', service: 'payments' } },
    tenants: [
      {
        id: 'demo',
        numbers: ['1000'],
        agent: 'billing',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        actions: { refund: { kind: 'mutation', provider: 'payments', intent } },
      },
    ],
  });
}

describe('when configured intent fields are checked against the tools that run the action', () => {
  it('should accept the bundled example and fields the refund tool has', () => {
    expect(() => runtimeFor(loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} }))).not.toThrow();
    expect(() => runtimeFor(withRefundIntent(['order_id', 'amount_cents']))).not.toThrow();
    expect(() => runtimeFor(withRefundIntent('all'))).not.toThrow();
  });

  it('should refuse to start with a misspelt field, which would make refunds of any amount one intent', () => {
    const error = (() => {
      try {
        runtimeFor(withRefundIntent(['order_id', 'amount']));
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(isCallgateError(error, 'CALLGATE_ERR_CONFIG_UNKNOWN_INTENT_FIELD')).toBe(true);
    expect(String(error)).toContain(
      'intent field amount (in tenants[demo].actions.refund.intent) is not an argument of tool refund',
    );
  });
});

describe('when a mutation has no intent fields from anyone', () => {
  it('should warn at start that it is keyed by all its arguments, unless all was chosen', () => {
    const lines: string[] = [];
    const log = new Logger({
      level: 'warn',
      sink: { write: (line: string) => void lines.push(line) },
    });
    const config = parseConfig({
      providers: { payments: { type: 'sandbox', service: 'payments' } },
      tenants: [
        {
          id: 'demo',
          numbers: ['1000'],
          agent: 'billing',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
          actions: {
            refund: { kind: 'mutation', provider: 'payments' },
            loyalty_points: { kind: 'mutation', provider: 'payments' },
            gift_card: { kind: 'mutation', provider: 'payments', intent: 'all' },
          },
        },
      ],
    });
    runtimeFor(config, log);
    const warned = lines.filter((line) => line.includes('keyed by all its arguments'));
    // refund: its tool declares the fields; gift_card: all was chosen; loyalty_points: nobody said.
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('loyalty_points');
  });
});
