/**
 * Parsers for the structured header values of RFC 3261 section 25: URIs (sip, sips, tel),
 * name-addr / addr-spec, Via (with RFC 3581 rport), CSeq, generic parameters and comma lists.
 * Pure functions over strings; hostile input yields a failure with a reason, never an exception.
 */
import type {
  CSeqHeader,
  NameAddr,
  SipParams,
  SipParseResult,
  SipUri,
  ViaHeader,
} from './message-types.ts';

type Result<T> = SipParseResult<T>;

const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });
const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });

/** RFC 3261 `token`. */
const TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]+$/;
const HOSTNAME =
  /^[A-Za-z0-9]([A-Za-z0-9\-_]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9\-_]*[A-Za-z0-9])?)*\.?$/;
const IPV4 = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
const IPV6_REFERENCE = /^\[[0-9A-Fa-f:.]+\]$/;
/** Characters allowed unescaped in the user part: unreserved, escaped and user-unreserved. */
const USER_CHARS = /^([A-Za-z0-9\-_.!~*'()&=+$,;?/]|%[0-9A-Fa-f]{2})+$/;
const PASSWORD_CHARS = /^([A-Za-z0-9\-_.!~*'()&=+$,]|%[0-9A-Fa-f]{2})*$/;
/** paramchar: param-unreserved, unreserved, escaped. */
const URI_PARAM_CHARS = /^([A-Za-z0-9\-_.!~*'()[\]/:&+$]|%[0-9A-Fa-f]{2})+$/;
const URI_HEADER_CHARS = /^([A-Za-z0-9\-_.!~*'()[\]/?:+$]|%[0-9A-Fa-f]{2})*$/;
const TEL_NUMBER = /^(\+[0-9\-.()]*[0-9][0-9\-.()]*|[0-9A-Fa-f*#\-.()pw]+)$/;
const DIGITS = /^\d+$/;
/** RFC 3261 section 8.1.1.5: CSeq must be below 2**31. */
const MAX_CSEQ = 2 ** 31 - 1;

export function isToken(text: string): boolean {
  return TOKEN.test(text);
}

export function isValidHost(host: string): boolean {
  if (IPV6_REFERENCE.test(host)) return true;
  if (IPV4.test(host)) return host.split('.').every((part) => Number(part) <= 255);
  return HOSTNAME.test(host) && host.length <= 255;
}

/** Decodes %XX escapes; `undefined` when an escape is broken. */
export function unescapeText(text: string): string | undefined {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    // Not UTF-8 after decoding: keep the bytes one by one rather than refuse the message.
    if (/%(?![0-9A-Fa-f]{2})/.test(text)) return undefined;
    return text.replace(/%([0-9A-Fa-f]{2})/g, (_whole, hex: string) =>
      String.fromCharCode(parseInt(hex, 16)),
    );
  }
}

/**
 * Splits a header value on commas that are outside quoted strings and angle brackets.
 * Returns `undefined` for an unterminated quote or bracket.
 */
export function splitList(value: string): string[] | undefined {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  let angle = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (quoted) {
      if (c === 0x5c) i++;
      else if (c === 0x22) quoted = false;
    } else if (c === 0x22) {
      quoted = true;
    } else if (c === 0x3c) {
      angle = true;
    } else if (c === 0x3e) {
      angle = false;
    } else if (c === 0x2c && !angle) {
      parts.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (quoted || angle) return undefined;
  parts.push(value.slice(start).trim());
  return parts;
}

/**
 * Reads `;name=value;name` parameters (header or URI) with optional linear white space around
 * `;` and `=`. Values may be quoted strings (kept with their quotes, as they are echoed verbatim).
 */
export function parseParams(text: string, forUri = false): Result<SipParams> {
  const params: Array<readonly [string, string | null]> = [];
  let rest = text.trim();
  while (rest.length > 0) {
    if (rest[0] !== ';') return fail(`expected ';' before parameter at "${clip(rest)}"`);
    rest = rest.slice(1).trimStart();
    let end = 0;
    while (end < rest.length && !';= \t'.includes(rest[end] ?? '')) end++;
    const name = rest.slice(0, end);
    if (name.length === 0) {
      // An empty parameter (";;") is tolerated in URIs, where RFC 4475 shows it in user parts.
      if (forUri) continue;
      return fail('empty parameter name');
    }
    if (forUri ? !URI_PARAM_CHARS.test(name) : !TOKEN.test(name))
      return fail(`invalid parameter name "${clip(name)}"`);
    rest = rest.slice(end).trimStart();
    let value: string | null = null;
    if (rest[0] === '=') {
      rest = rest.slice(1).trimStart();
      if (rest[0] === '"') {
        const close = closingQuote(rest);
        if (close < 0) return fail(`unterminated quoted value for parameter ${clip(name)}`);
        value = rest.slice(0, close + 1);
        rest = rest.slice(close + 1).trimStart();
      } else {
        let vEnd = 0;
        while (vEnd < rest.length && !'; \t'.includes(rest[vEnd] ?? '')) vEnd++;
        value = rest.slice(0, vEnd);
        if (value.length === 0 && !forUri) return fail(`empty value for parameter ${clip(name)}`);
        const valid = forUri
          ? URI_PARAM_CHARS.test(value) || value === ''
          : TOKEN.test(value) || isIpv6Reference(value);
        if (!valid) return fail(`invalid value for parameter ${clip(name)}`);
        rest = rest.slice(vEnd).trimStart();
      }
    }
    params.push([name, value]);
  }
  return ok(params);
}

function isIpv6Reference(value: string): boolean {
  return IPV6_REFERENCE.test(value);
}

/** Index of the quote closing the quoted string that starts at 0, or -1. */
function closingQuote(text: string): number {
  for (let i = 1; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '"') return i;
  }
  return -1;
}

/** The first value of parameter `name` (case-insensitive), `null` for a flag, `undefined` if absent. */
export function paramValue(params: SipParams, name: string): string | null | undefined {
  const lower = name.toLowerCase();
  for (const [key, value] of params) if (key.toLowerCase() === lower) return value;
  return undefined;
}

export function parseUri(text: string): Result<SipUri> {
  const colon = text.indexOf(':');
  if (colon <= 0) return fail(`URI without scheme: "${clip(text)}"`);
  const scheme = text.slice(0, colon).toLowerCase();
  const rest = text.slice(colon + 1);
  if (/[\s<>"]/.test(text))
    return fail(`URI contains white space, quotes or angle brackets: "${clip(text)}"`);
  if (scheme === 'tel') return parseTelUri(rest);
  if (scheme !== 'sip' && scheme !== 'sips') return fail(`unsupported URI scheme ${clip(scheme)}`);
  const at = rest.lastIndexOf('@');
  let user: string | undefined;
  let password: string | undefined;
  let hostPart = rest;
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    hostPart = rest.slice(at + 1);
    const pw = userinfo.indexOf(':');
    const rawUser = pw >= 0 ? userinfo.slice(0, pw) : userinfo;
    if (!USER_CHARS.test(rawUser)) return fail(`invalid user part in URI "${clip(text)}"`);
    user = unescapeText(rawUser);
    if (user === undefined) return fail('broken escape in URI user part');
    if (pw >= 0) {
      const rawPassword = userinfo.slice(pw + 1);
      if (!PASSWORD_CHARS.test(rawPassword)) return fail('invalid password in URI');
      password = unescapeText(rawPassword);
    }
  }
  const question = hostPart.indexOf('?');
  const headerText = question >= 0 ? hostPart.slice(question + 1) : '';
  const beforeHeaders = question >= 0 ? hostPart.slice(0, question) : hostPart;
  const semi = beforeHeaders.indexOf(';');
  const hostport = semi >= 0 ? beforeHeaders.slice(0, semi) : beforeHeaders;
  const paramText = semi >= 0 ? beforeHeaders.slice(semi) : '';
  const hp = parseHostPort(hostport);
  if (!hp.ok) return hp;
  const params = parseParams(paramText, true);
  if (!params.ok) return params;
  const headers: Array<readonly [string, string | null]> = [];
  if (headerText.length > 0) {
    for (const pair of headerText.split('&')) {
      const eq = pair.indexOf('=');
      const name = eq >= 0 ? pair.slice(0, eq) : pair;
      const value = eq >= 0 ? pair.slice(eq + 1) : '';
      if (name.length === 0 || !URI_HEADER_CHARS.test(name) || !URI_HEADER_CHARS.test(value))
        return fail('invalid URI header');
      headers.push([name, value]);
    }
  }
  return ok({
    scheme,
    ...(user !== undefined ? { user } : {}),
    ...(password !== undefined ? { password } : {}),
    host: hp.value.host,
    ...(hp.value.port !== undefined ? { port: hp.value.port } : {}),
    params: params.value,
    headers,
  });
}

function parseTelUri(rest: string): Result<SipUri> {
  const semi = rest.indexOf(';');
  const number = semi >= 0 ? rest.slice(0, semi) : rest;
  if (!TEL_NUMBER.test(number)) return fail(`invalid tel number "${clip(number)}"`);
  const params = parseParams(semi >= 0 ? rest.slice(semi) : '', true);
  if (!params.ok) return params;
  return ok({ scheme: 'tel', number, params: params.value });
}

/** host [":" port]; the port may be surrounded by white space in Via (COLON is SWS ":" SWS). */
export function parseHostPort(text: string): Result<{ host: string; port?: number }> {
  const trimmed = text.trim();
  let host: string;
  let portText: string | undefined;
  if (trimmed.startsWith('[')) {
    const close = trimmed.indexOf(']');
    if (close < 0) return fail('unterminated IPv6 reference');
    host = trimmed.slice(0, close + 1);
    const after = trimmed.slice(close + 1).trim();
    if (after.length > 0) {
      if (after[0] !== ':') return fail(`unexpected text after host: "${clip(after)}"`);
      portText = after.slice(1).trim();
    }
  } else {
    const colon = trimmed.indexOf(':');
    host = (colon >= 0 ? trimmed.slice(0, colon) : trimmed).trim();
    if (colon >= 0) portText = trimmed.slice(colon + 1).trim();
  }
  if (!isValidHost(host)) return fail(`invalid host "${clip(host)}"`);
  if (portText === undefined) return ok({ host });
  if (!DIGITS.test(portText) || portText.length > 5 || Number(portText) > 65535)
    return fail(`invalid port "${clip(portText)}"`);
  return ok({ host, port: Number(portText) });
}

/** Reads a display name: a quoted string (unescaped) or a run of tokens separated by white space. */
function parseDisplayName(text: string): Result<string | undefined> {
  const trimmed = text.trim();
  if (trimmed.length === 0) return ok(undefined);
  if (trimmed.startsWith('"')) {
    const close = closingQuote(trimmed);
    if (close !== trimmed.length - 1) return fail('unbalanced quotes in display name');
    return ok(trimmed.slice(1, close).replace(/\\(.)/gs, '$1'));
  }
  for (const word of trimmed.split(/\s+/))
    if (!TOKEN.test(word)) return fail(`invalid display name "${clip(trimmed)}"`);
  return ok(trimmed);
}

/** name-addr (`"Alice" <sip:a@b>;tag=1`) or addr-spec (`sip:a@b;tag=1`, params belong to the header). */
export function parseNameAddr(text: string): Result<NameAddr> {
  const value = text.trim();
  let lt = -1;
  if (value.startsWith('"')) {
    const close = closingQuote(value);
    if (close < 0) return fail('unterminated quoted display name');
    lt = value.indexOf('<', close);
    if (lt < 0) return fail('quoted display name without <URI>');
  } else {
    lt = value.indexOf('<');
  }
  if (lt >= 0) {
    const gt = value.indexOf('>', lt);
    if (gt < 0) return fail('unterminated <URI>');
    const display = parseDisplayName(value.slice(0, lt));
    if (!display.ok) return display;
    const uriText = value.slice(lt + 1, gt);
    if (uriText !== uriText.trim()) return fail('white space inside <URI>');
    const uri = parseUri(uriText);
    if (!uri.ok) return uri;
    const params = parseParams(value.slice(gt + 1));
    if (!params.ok) return params;
    return ok({
      ...(display.value !== undefined ? { displayName: display.value } : {}),
      uri: uri.value,
      uriText,
      params: params.value,
    });
  }
  // addr-spec: a URI with ';' params can only be written in angle brackets, so ';' starts header params.
  const semi = value.indexOf(';');
  const uriText = (semi >= 0 ? value.slice(0, semi) : value).trim();
  if (/[\s,?]/.test(uriText))
    return fail(
      `addr-spec must be in <> when it contains white space, ',' or '?': "${clip(value)}"`,
    );
  const uri = parseUri(uriText);
  if (!uri.ok) return uri;
  const params = parseParams(semi >= 0 ? value.slice(semi) : '');
  if (!params.ok) return params;
  return ok({ uri: uri.value, uriText, params: params.value });
}

export function parseVia(text: string): Result<ViaHeader> {
  const match = /^\s*([^\s/]+)\s*\/\s*([^\s/]+)\s*\/\s*([^\s/;]+)\s+([^;]+?)\s*(;.*)?$/s.exec(text);
  if (match === null) return fail(`malformed Via "${clip(text)}"`);
  const [, name = '', version = '', transport = '', sentBy = '', paramText = ''] = match;
  if (!TOKEN.test(name) || !TOKEN.test(version) || !TOKEN.test(transport))
    return fail('malformed Via protocol');
  if (name.toUpperCase() !== 'SIP' || version !== '2.0')
    return fail(`unsupported Via protocol ${clip(name)}/${clip(version)}`);
  const hp = parseHostPort(sentBy);
  if (!hp.ok) return fail(`Via: ${hp.reason}`);
  const params = parseParams(paramText);
  if (!params.ok) return fail(`Via: ${params.reason}`);
  const branch = paramValue(params.value, 'branch');
  const received = paramValue(params.value, 'received');
  const rport = paramValue(params.value, 'rport');
  if (rport !== undefined && rport !== null && (!DIGITS.test(rport) || Number(rport) > 65535))
    return fail('Via: invalid rport');
  return ok({
    protocol: 'SIP/2.0',
    transport: transport.toUpperCase(),
    host: hp.value.host,
    ...(hp.value.port !== undefined ? { port: hp.value.port } : {}),
    params: params.value,
    ...(typeof branch === 'string' ? { branch } : {}),
    ...(typeof received === 'string' ? { received } : {}),
    ...(rport === null
      ? { rport: true as const }
      : rport !== undefined
        ? { rport: Number(rport) }
        : {}),
  });
}

export function parseCSeq(text: string): Result<CSeqHeader> {
  const match = /^\s*(\d+)\s+(\S+)\s*$/.exec(text);
  if (match === null) return fail(`malformed CSeq "${clip(text)}"`);
  const [, digits = '', method = ''] = match;
  if (digits.length > 10 || Number(digits) > MAX_CSEQ)
    return fail('CSeq number is not below 2**31');
  if (!TOKEN.test(method)) return fail('CSeq method is not a token');
  return ok({ seq: Number(digits), method });
}

/** Keeps reasons short so a hostile megabyte never ends up in a log line or a reason phrase. */
export function clip(text: string): string {
  const printable = text.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 40 ? `${printable.slice(0, 40)}...` : printable;
}
