/**
 * Pure translations between drachtio-srf's messages and callgate's signaling types: the
 * connection settings from config, NOTIFY sipfrag to transfer progress, and the reconnect
 * back-off. Kept apart from the driver so they are testable without a drachtio-server. INFO
 * bodies are read by `../info-body.ts`, which the built-in stack shares.
 */
import { CallgateError } from '../../../config/errors.ts';
import type { SipConfig } from '../../../config/schema.ts';
export { sipfragProgress } from '../sipfrag.ts';

export interface DrachtioConnection {
  readonly host: string;
  readonly port: number;
  readonly secret: string;
}

/** The srf.connect settings; the secret is read from the variable the config names. */
export function drachtioConnection(
  sip: SipConfig,
  readSecret: (name: string) => string | undefined,
): DrachtioConnection {
  const { host, port, secretEnv } = sip.drachtio;
  const secret = readSecret(secretEnv);
  if (secret === undefined || secret.length === 0) {
    throw new CallgateError('CALLGATE_ERR_SIP_DRACHTIO_CONNECTION', {
      address: `${host}:${port}`,
      reason: `${secretEnv} is not set`,
    });
  }
  return { host, port, secret };
}

/** The longest wait between reconnect attempts: a restarted sidecar is back within seconds. */
export const MAX_RECONNECT_DELAY_MS = 30_000;

/** Doubling back-off from `reconnectMs`, capped, so a dead sidecar is not hammered. */
export function reconnectDelay(attempt: number, reconnectMs: number): number {
  return Math.min(MAX_RECONNECT_DELAY_MS, reconnectMs * 2 ** Math.max(0, Math.min(attempt, 16)));
}

/** The called number of a drachtio request: the Request-URI user, else the To user. */
export function calledNumberOf(requestUri: string, toHeader: string): string | undefined {
  const user = (text: string): string | undefined =>
    /^(?:.*<)?(?:sips?:([^@;>]+)@|tel:([^;>]+))/i
      .exec(text.trim())
      ?.slice(1)
      .find((part) => part !== undefined);
  return user(requestUri) ?? user(toHeader);
}
