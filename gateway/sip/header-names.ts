/**
 * Header names: compact forms (RFC 3261 section 7.3.3 and later RFCs), the canonical spelling of
 * known headers, which headers are comma lists, and lookups on a parsed header list.
 */
import type { SipHeader } from './message-types.ts';

const COMPACT: Readonly<Record<string, string>> = {
  i: 'Call-ID',
  m: 'Contact',
  f: 'From',
  t: 'To',
  v: 'Via',
  l: 'Content-Length',
  c: 'Content-Type',
  k: 'Supported',
  s: 'Subject',
  e: 'Content-Encoding',
  r: 'Refer-To',
  o: 'Event',
  u: 'Allow-Events',
  b: 'Referred-By',
  x: 'Session-Expires',
};

const KNOWN = [
  'Accept',
  'Accept-Encoding',
  'Accept-Language',
  'Alert-Info',
  'Allow',
  'Allow-Events',
  'Authorization',
  'Call-ID',
  'Call-Info',
  'Contact',
  'Content-Disposition',
  'Content-Encoding',
  'Content-Language',
  'Content-Length',
  'Content-Type',
  'CSeq',
  'Date',
  'Error-Info',
  'Event',
  'Expires',
  'From',
  'In-Reply-To',
  'Max-Forwards',
  'MIME-Version',
  'Min-Expires',
  'Organization',
  'P-Asserted-Identity',
  'Priority',
  'Proxy-Authenticate',
  'Proxy-Authorization',
  'Proxy-Require',
  'Reason',
  'Record-Route',
  'Refer-To',
  'Referred-By',
  'Reply-To',
  'Require',
  'Retry-After',
  'Route',
  'Server',
  'Session-Expires',
  'Subject',
  'Subscription-State',
  'Supported',
  'Timestamp',
  'To',
  'Unsupported',
  'User-Agent',
  'Via',
  'Warning',
  'WWW-Authenticate',
];

const CANONICAL = new Map<string, string>(KNOWN.map((name) => [name.toLowerCase(), name]));
for (const [short, long] of Object.entries(COMPACT)) CANONICAL.set(short, long);

/**
 * Headers whose grammar is `#(element)`: several values may share one line, comma separated.
 * P-Asserted-Identity is one too, but caller-identity.ts splits it: a malformed one is ignored,
 * not a reason to refuse the INVITE (test/unit/sip/caller-identity.test.ts).
 */
const LIST_HEADERS = new Set([
  'Via',
  'Contact',
  'Route',
  'Record-Route',
  'Allow',
  'Supported',
  'Require',
  'Proxy-Require',
  'Unsupported',
  'Accept',
  'Accept-Encoding',
  'Accept-Language',
  'Allow-Events',
  'Content-Encoding',
]);

/** Headers that may appear at most once; a second, different value makes the request malformed. */
export const SINGLE_HEADERS = [
  'From',
  'To',
  'Call-ID',
  'CSeq',
  'Max-Forwards',
  'Content-Length',
  'Content-Type',
] as const;

/** The canonical name for a received name (case-insensitive, compact forms expanded). */
export function canonicalHeaderName(name: string): string {
  return CANONICAL.get(name.toLowerCase()) ?? name;
}

export function isListHeader(canonicalName: string): boolean {
  return LIST_HEADERS.has(canonicalName);
}

/** The first value of a header, by any spelling of its name. */
export function headerValue(headers: readonly SipHeader[], name: string): string | undefined {
  const wanted = canonicalHeaderName(name);
  for (const header of headers) if (header.name === wanted) return header.value;
  return undefined;
}

/** Every value of a header, in order (list headers already split into one entry per value). */
export function headerValues(headers: readonly SipHeader[], name: string): string[] {
  const wanted = canonicalHeaderName(name);
  const values: string[] = [];
  for (const header of headers) if (header.name === wanted) values.push(header.value);
  return values;
}
