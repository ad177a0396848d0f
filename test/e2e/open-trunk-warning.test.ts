/**
 * The gateway as the product runs it (gateway/main.ts) with SIP on every interface: a tenant
 * declared open (`trunk.open: true`) is logged as a warning at start, a closed one is not.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';

const SCRIPT = { name: 'e2e-open-trunk', greeting: 'Hello.', fallback: 'Anything else?' };

let callgate: CallgateProcess | undefined;
afterEach(async () => {
  await callgate?.stop();
  callgate = undefined;
});

interface LogLine {
  /** `warn`, or 40 where levels are logged as numbers. */
  readonly level?: string | number;
  readonly msg?: string;
  readonly tenant?: string;
}

describe('when a gateway starts with an open tenant on a non-loopback SIP listener', () => {
  it('should warn of that tenant, and of no closed one', { timeout: 90_000 }, async () => {
    callgate = await startCallgate({
      script: SCRIPT,
      overrides: (config) => {
        config.sip = { ...(config.sip as Record<string, unknown>), listen: '0.0.0.0' };
        const tenants = config.tenants as Record<string, unknown>[];
        tenants.push({
          ...structuredClone(tenants[0] ?? {}),
          id: 'lobby',
          numbers: ['2000'],
          trunk: { open: true },
        });
      },
    });
    const warnings = callgate.proc
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as LogLine)
      .filter(
        (line) => line.msg === 'tenant takes calls from anyone on a non-loopback SIP listener',
      );
    expect(warnings.map((line) => line.tenant)).toEqual(['lobby']);
    expect(['warn', 40]).toContain(warnings[0]?.level);
  });
});
