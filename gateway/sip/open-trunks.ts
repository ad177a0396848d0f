/**
 * Tenants that take calls from anyone (`trunk.open: true`) while the SIP listener is reachable
 * from beyond this host: each start logs them as a warning (test/unit/sip/open-trunks.test.ts).
 */
import { BlockList, isIPv6 } from 'node:net';
import type { Config } from '../../config/schema.ts';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

function isLoopbackAddress(address: string): boolean {
  return LOOPBACK.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
}

/**
 * Where SIP is heard from: the built-in stack's listen address; drachtio-server's listeners are
 * configured outside callgate, so they count as reachable.
 */
export function sipListenerIsLoopback(sip: Config['sip']): boolean {
  return sip.driver === 'builtin' && isLoopbackAddress(sip.listen);
}

/** Ids of the open tenants, empty while SIP listens on loopback only. */
export function openTenantsOnPublicListener(config: Pick<Config, 'sip' | 'tenants'>): string[] {
  if (sipListenerIsLoopback(config.sip)) return [];
  return config.tenants.filter((tenant) => tenant.trunk.open).map((tenant) => tenant.id);
}
