/** Picks the signaling driver the configuration names (`sip.driver`). */
import type { Logger } from '../../config/log.ts';
import type { Config } from '../../config/schema.ts';
import { BuiltinSignalingDriver } from './builtin-driver.ts';
import { DrachtioSignalingDriver } from './drachtio/drachtio-driver.ts';
import type { SignalingDriver } from './signaling-driver.ts';

export function createSignalingDriver(
  config: Pick<Config, 'sip' | 'tenants'>,
  logger?: Logger,
): SignalingDriver {
  const options = {
    sip: config.sip,
    tenants: config.tenants,
    ...(logger !== undefined ? { logger } : {}),
  };
  return config.sip.driver === 'drachtio'
    ? new DrachtioSignalingDriver(options)
    : new BuiltinSignalingDriver(options);
}
