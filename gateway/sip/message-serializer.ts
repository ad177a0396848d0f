/**
 * Serializes SIP messages to wire bytes. Content-Length is always computed here from the body's
 * byte length, so a message callgate sends can never carry a wrong one.
 */
import type {
  NameAddr,
  SipHeader,
  SipMessage,
  SipParams,
  SipUri,
  ViaHeader,
} from './message-types.ts';

export interface OutgoingRequest {
  readonly method: string;
  readonly uriText: string;
  readonly headers: readonly SipHeader[];
  readonly body?: string;
}

export interface OutgoingResponse {
  readonly status: number;
  readonly reason: string;
  readonly headers: readonly SipHeader[];
  readonly body?: string;
}

export function serializeRequest(request: OutgoingRequest): Buffer {
  return assemble(
    `${request.method} ${request.uriText} SIP/2.0`,
    request.headers,
    request.body ?? '',
  );
}

export function serializeResponse(response: OutgoingResponse): Buffer {
  return assemble(
    `SIP/2.0 ${response.status} ${response.reason}`,
    response.headers,
    response.body ?? '',
  );
}

/** Re-serializes a parsed message from its header list (used to forward or log it faithfully). */
export function serializeMessage(message: SipMessage): Buffer {
  return message.kind === 'request'
    ? serializeRequest({
        method: message.method,
        uriText: message.uriText,
        headers: message.headers,
        body: message.body,
      })
    : serializeResponse({
        status: message.status,
        reason: message.reason,
        headers: message.headers,
        body: message.body,
      });
}

/** Control characters other than HTAB: none may reach a start line or a header value. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/g;

/**
 * One line of the head, whatever text went into it: a CR or LF (from a peer's text that slipped
 * through) would end the line and start a header of the peer's choosing, so each becomes a space.
 */
function oneLine(text: string): string {
  CONTROL.lastIndex = 0;
  return CONTROL.test(text) ? text.replace(CONTROL, ' ') : text;
}

function assemble(startLine: string, headers: readonly SipHeader[], body: string): Buffer {
  let text = `${oneLine(startLine)}\r\n`;
  for (const header of headers) {
    if (header.name === 'Content-Length') continue;
    text += `${header.name}: ${oneLine(header.value)}\r\n`;
  }
  text += `Content-Length: ${Buffer.byteLength(body, 'utf8')}\r\n\r\n${body}`;
  return Buffer.from(text, 'utf8');
}

export function formatParams(params: SipParams): string {
  let text = '';
  for (const [name, value] of params) text += value === null ? `;${name}` : `;${name}=${value}`;
  return text;
}

export function formatUri(uri: SipUri): string {
  if (uri.scheme === 'tel') return `tel:${uri.number}${formatParams(uri.params)}`;
  const user =
    uri.user !== undefined
      ? `${escapeUser(uri.user)}${uri.password !== undefined ? `:${escapeUser(uri.password)}` : ''}@`
      : '';
  const port = uri.port !== undefined ? `:${uri.port}` : '';
  const headers =
    uri.headers.length > 0
      ? `?${uri.headers.map(([name, value]) => `${name}=${value ?? ''}`).join('&')}`
      : '';
  return `${uri.scheme}:${user}${uri.host}${port}${formatParams(uri.params)}${headers}`;
}

function escapeUser(user: string): string {
  return user.replace(/[^A-Za-z0-9\-_.!~*'()&=+$,;?/]/g, (c) =>
    Array.from(
      Buffer.from(c, 'utf8'),
      (byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    ).join(''),
  );
}

export function formatNameAddr(value: NameAddr): string {
  const display =
    value.displayName !== undefined ? `"${value.displayName.replace(/(["\\])/g, '\\$1')}" ` : '';
  return `${display}<${value.uriText}>${formatParams(value.params)}`;
}

export function formatVia(via: ViaHeader): string {
  const port = via.port !== undefined ? `:${via.port}` : '';
  return `SIP/2.0/${via.transport} ${via.host}${port}${formatParams(via.params)}`;
}
