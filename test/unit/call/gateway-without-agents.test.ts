import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../config/load.ts';
import { startCallGateway } from '../../../gateway/call/start-call-gateway.ts';
import type { ActionLayer } from '../../../jobs/action-layer.ts';
import type { ProcessContext } from '../../../jobs/process-runtime.ts';
import { quietLog } from '../../support/action-harness.ts';

describe('when a gateway starts on a configuration without agents', () => {
  it('should refuse to start, naming the tenant whose agent it does not have', async () => {
    const config = parseConfig({
      tenants: [
        {
          id: 'clinic',
          numbers: ['2000'],
          agent: 'front_desk',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        },
        {
          id: 'echo',
          numbers: ['2001'],
          agent: 'front_desk',
          trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
          mediaTest: { mode: 'echo' },
        },
      ],
    });
    // Refused before anything is opened: nothing else of the context is touched.
    const context = { config, log: quietLog, gatewayId: 'gw-1' } as unknown as ProcessContext;
    const started = startCallGateway(context, {} as ActionLayer);
    await expect(started).rejects.toThrow(ConfigError);
    await expect(started).rejects.toMatchObject({
      problems: [
        'tenants[0].agent: unknown agent front_desk (the configuration has no agents section)',
      ],
    });
  });
});
