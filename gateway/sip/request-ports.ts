/**
 * Ports a request names for callgate to send to: the topmost Via (where responses go), Contact
 * (the remote target of a dialog) and Record-Route (its route set). Port 0 cannot be sent to (a
 * socket throws on it) and a port above 65535 does not exist; a request naming either is answered
 * 400 with a reason phrase that says which header was wrong (RFC 3261 section 21.4.1), before
 * anything is built on it. Pure.
 */
import { headerValues } from './header-names.ts';
import { parseNameAddr } from './header-parser.ts';
import type { SipRequest } from './message-types.ts';
import { isUsablePort } from './sip-transport.ts';

/** Headers whose URIs become places callgate sends to, in the order they are checked. */
const TARGET_HEADERS = ['Contact', 'Record-Route'] as const;

/** The reason phrase of the 400 for a request naming an unusable port; undefined when all are usable. */
export function unusablePortReason(request: SipRequest): string | undefined {
  const top = request.via[0];
  // A Via port above 65535 never parses, so such a request has no Via to answer to and is dropped.
  if (top?.port !== undefined && !isUsablePort(top.port)) return `Invalid Port ${top.port} in Via`;
  for (const name of TARGET_HEADERS) {
    for (const value of headerValues(request.headers, name)) {
      if (value === '*') continue;
      const parsed = parseNameAddr(value);
      if (!parsed.ok) {
        if (/invalid port/i.test(parsed.reason)) return `Invalid Port in ${name}`;
        continue;
      }
      const uri = parsed.value.uri;
      if (uri.scheme !== 'tel' && uri.port !== undefined && !isUsablePort(uri.port))
        return `Invalid Port ${uri.port} in ${name}`;
    }
  }
  return undefined;
}
