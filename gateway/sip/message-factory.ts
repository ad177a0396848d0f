/**
 * Builds the responses and requests callgate sends, from a received request and the few values
 * that differ (status, tag, extra headers, body). RFC 3261 section 8.2.6 fixes what a response copies.
 */
import { headerValues } from './header-names.ts';
import { paramValue } from './header-parser.ts';
import { formatVia, type OutgoingResponse } from './message-serializer.ts';
import type { SipHeader, SipRequest, ViaHeader } from './message-types.ts';

const REASONS: Readonly<Record<number, string>> = {
  100: 'Trying',
  180: 'Ringing',
  183: 'Session Progress',
  200: 'OK',
  202: 'Accepted',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  415: 'Unsupported Media Type',
  416: 'Unsupported URI Scheme',
  420: 'Bad Extension',
  480: 'Temporarily Unavailable',
  481: 'Call/Transaction Does Not Exist',
  483: 'Too Many Hops',
  486: 'Busy Here',
  487: 'Request Terminated',
  488: 'Not Acceptable Here',
  491: 'Request Pending',
  500: 'Server Internal Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
  505: 'Version Not Supported',
  603: 'Decline',
};

export function reasonPhrase(status: number): string {
  return REASONS[status] ?? (status < 200 ? 'Progress' : status < 300 ? 'OK' : 'Error');
}

export interface ResponseOptions {
  readonly reason?: string;
  /** Added to To when the request's To has no tag (a dialog-creating or out-of-dialog answer). */
  readonly toTag?: string;
  readonly headers?: readonly SipHeader[];
  readonly body?: string;
  readonly contentType?: string;
}

/** The minimum a response needs from its request: what `SipRequest` and a 400 for a half-parsed one share. */
export interface AnswerableRequest {
  readonly headers: readonly SipHeader[];
}

export function buildResponse(
  request: AnswerableRequest | SipRequest,
  status: number,
  options: ResponseOptions = {},
): OutgoingResponse {
  const headers: SipHeader[] = [];
  for (const via of headerValues(request.headers, 'Via')) headers.push({ name: 'Via', value: via });
  const to = headerValues(request.headers, 'To')[0] ?? '';
  const toHasTag =
    'to' in request ? paramValue(request.to.params, 'tag') !== undefined : /;\s*tag\s*=/i.test(to);
  headers.push({ name: 'From', value: headerValues(request.headers, 'From')[0] ?? '' });
  headers.push({
    name: 'To',
    value:
      options.toTag !== undefined && !toHasTag && status > 100 ? `${to};tag=${options.toTag}` : to,
  });
  headers.push({ name: 'Call-ID', value: headerValues(request.headers, 'Call-ID')[0] ?? '' });
  headers.push({ name: 'CSeq', value: headerValues(request.headers, 'CSeq')[0] ?? '' });
  if (options.headers !== undefined) headers.push(...options.headers);
  if (options.body !== undefined && options.body.length > 0) {
    headers.push({ name: 'Content-Type', value: options.contentType ?? 'application/sdp' });
  }
  return {
    status,
    reason: options.reason ?? reasonPhrase(status),
    headers,
    ...(options.body !== undefined ? { body: options.body } : {}),
  };
}

/**
 * RFC 3261 section 18.2.1 and RFC 3581: the server notes on the topmost Via where the request
 * really came from (received, and rport when asked for), so responses go back through the NAT.
 * A received or rport value the peer wrote itself is never kept: it would let the peer send
 * callgate's responses (and their retransmissions) to an address of its choosing.
 */
export function stampReceived(
  request: SipRequest,
  sourceAddress: string,
  sourcePort: number,
): SipRequest {
  const top = request.via[0];
  if (top === undefined) return request;
  const needsReceived =
    top.host.replace(/^\[|\]$/g, '') !== sourceAddress || top.rport !== undefined;
  if (!needsReceived && top.received === undefined) return request;
  const params = top.params.filter(([name]) => {
    const lower = name.toLowerCase();
    return lower !== 'received' && lower !== 'rport';
  });
  if (needsReceived) params.push(['received', sourceAddress]);
  if (top.rport !== undefined) params.push(['rport', String(sourcePort)]);
  const { received: _peerReceived, rport: _peerRport, ...rest } = top;
  const via: ViaHeader = {
    ...rest,
    params,
    ...(needsReceived ? { received: sourceAddress } : {}),
    ...(top.rport !== undefined ? { rport: sourcePort } : {}),
  };
  let replaced = false;
  const headers = request.headers.map((header) => {
    if (replaced || header.name !== 'Via') return header;
    replaced = true;
    return { name: 'Via', value: formatVia(via) };
  });
  return { ...request, headers, via: [via, ...request.via.slice(1)] };
}

/** Longest text put in a Warning header: enough to say what was wrong, never a copy of the message. */
const MAX_WARNING_TEXT = 120;

/**
 * The Warning header value (RFC 3261 section 20.43) that says why a request was refused. The text
 * often quotes the peer (a line of its SDP, a header it sent), so inside the quoted-string it keeps
 * no quote or backslash (made `'`) and no control character (made a space): a CR or LF would end
 * the header and start one of the peer's choosing.
 */
export function warningValue(text: string): string {
  let quoted = '';
  for (const char of text.slice(0, MAX_WARNING_TEXT)) {
    const code = char.charCodeAt(0);
    if (char === '"' || char === '\\') quoted += "'";
    else quoted += code < 0x20 || code === 0x7f ? ' ' : char;
  }
  return `399 callgate "${quoted}${text.length > MAX_WARNING_TEXT ? '...' : ''}"`;
}
