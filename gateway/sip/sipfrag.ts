/**
 * The progress a REFER's NOTIFY reports in its message/sipfrag body (RFC 3515): the status line of
 * the transfer target's answer. Pure, shared by both signaling drivers.
 */
import type { TransferProgress } from './signaling-driver.ts';

/** Longer bodies are not a status line: only the first this many characters are read. */
const MAX_SIPFRAG_CHARS = 1_024;

export function sipfragProgress(body: string): TransferProgress | undefined {
  const match = /^SIP\/2\.0 (\d{3})(?: ([^\r\n]*))?\r?$/m.exec(body.slice(0, MAX_SIPFRAG_CHARS));
  if (match === null) return undefined;
  const status = Number(match[1]);
  if (status < 200)
    return { state: status === 180 || status === 183 ? 'ringing' : 'trying', status };
  if (status < 300) return { state: 'succeeded', status };
  return { state: 'failed', status, reason: (match[2] ?? '').trim() };
}
