/**
 * Parses one complete SIP message (a UDP datagram, or one message cut out of a TCP stream by the
 * stream framer). Pure: no I/O, no exceptions for hostile input; every failure says what was wrong
 * and, for a request whose routing headers were readable, how it can still be answered.
 */
import {
  SINGLE_HEADERS,
  canonicalHeaderName,
  headerValue,
  headerValues,
  isListHeader,
} from './header-names.ts';
import {
  clip,
  isToken,
  parseCSeq,
  parseNameAddr,
  parseUri,
  parseVia,
  splitList,
} from './header-parser.ts';
import type {
  SipHeader,
  SipMessage,
  SipParseFailure,
  SipParseResult,
  ViaHeader,
} from './message-types.ts';

export interface SipParseOptions {
  /** Messages larger than this are refused before any parsing. */
  readonly maxBytes?: number;
  /**
   * Stream transports must carry Content-Length (RFC 3261 section 18.3); a datagram without it
   * has a body that runs to the end of the datagram.
   */
  readonly stream?: boolean;
}

/** Upper bound used when the caller gives none: the largest UDP payload. */
const DEFAULT_MAX_BYTES = 65_535;
const MAX_HEADER_LINES = 256;
const CRLF_CRLF = Buffer.from('\r\n\r\n');
const LF_LF = Buffer.from('\n\n');
const REQUEST_LINE = /^([^ ]+) ([^ ]+) ([^ ]+)$/;
const STATUS_LINE = /^SIP\/2\.0 (\d{3}) ?(.*)$/;
const SIP_VERSION = 'SIP/2.0';

export function parseSipMessage(
  data: Buffer | string,
  options: SipParseOptions = {},
): SipParseResult<SipMessage> {
  const buffer = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  if (buffer.length > maxBytes)
    return {
      ok: false,
      reason: `message of ${buffer.length} bytes is above the limit of ${maxBytes}`,
    };
  let start = 0;
  while (start < buffer.length && (buffer[start] === 0x0d || buffer[start] === 0x0a)) start++;
  if (start === buffer.length) return { ok: false, reason: 'empty message' };

  let headerEnd = buffer.indexOf(CRLF_CRLF, start);
  let bodyStart = headerEnd + 4;
  const lfEnd = buffer.indexOf(LF_LF, start);
  if (lfEnd >= 0 && (headerEnd < 0 || lfEnd < headerEnd)) {
    headerEnd = lfEnd;
    bodyStart = lfEnd + 2;
  }
  if (headerEnd < 0) {
    if (options.stream === true)
      return { ok: false, reason: 'headers are not terminated by an empty line' };
    headerEnd = buffer.length;
    bodyStart = buffer.length;
  }
  const head = buffer.toString('utf8', start, headerEnd);
  const lines = unfold(head.split(/\r?\n/));
  if (lines.length > MAX_HEADER_LINES)
    return { ok: false, reason: `more than ${MAX_HEADER_LINES} header lines` };
  const startLine = lines[0] ?? '';

  const headers: SipHeader[] = [];
  let headerProblem: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const colon = line.indexOf(':');
    if (colon <= 0) {
      headerProblem ??= `header line without a name and colon: "${clip(line)}"`;
      continue;
    }
    const name = line.slice(0, colon).trimEnd();
    if (!isToken(name)) {
      headerProblem ??= `invalid header name "${clip(name)}"`;
      continue;
    }
    const canonical = canonicalHeaderName(name);
    const value = line.slice(colon + 1).trim();
    if (isListHeader(canonical) && value !== '*') {
      const parts = splitList(value);
      if (parts === undefined) {
        headerProblem ??= `unbalanced quotes or brackets in ${clip(canonical)}`;
        continue;
      }
      for (const part of parts) {
        if (part.length === 0) continue;
        headers.push({ name: canonical, value: part });
      }
    } else {
      headers.push({ name: canonical, value });
    }
  }

  const status = STATUS_LINE.exec(startLine);
  if (status !== null) {
    return parseResponse(
      Number(status[1]),
      status[2] ?? '',
      headers,
      headerProblem,
      buffer,
      bodyStart,
      options,
    );
  }
  if (startLine.startsWith('SIP/'))
    return { ok: false, reason: `malformed status line "${clip(startLine)}"` };
  const routing = readRouting(headers);
  const request = REQUEST_LINE.exec(startLine);
  if (request === null) {
    const reason = `malformed request line "${clip(startLine)}"`;
    const method = startLine.split(' ')[0] ?? '';
    // A request line with stray white space still names its method and can be answered 400.
    if (isToken(method) && routing.via !== undefined && routing.problem === undefined) {
      return { ok: false, reason, answerable: { status: 400, method, headers, via: routing.via } };
    }
    return { ok: false, reason };
  }
  const [, method = '', uriText = '', version = ''] = request;
  if (!isToken(method)) return { ok: false, reason: `method "${clip(method)}" is not a token` };
  const failWith = (reason: string, answerStatus = 400): SipParseFailure =>
    routing.via === undefined
      ? { ok: false, reason }
      : {
          ok: false,
          reason,
          answerable: { status: answerStatus, method, headers, via: routing.via },
        };
  if (routing.problem !== undefined) return { ok: false, reason: routing.problem };
  if (version !== SIP_VERSION) {
    return /^SIP\/\d+\.\d+$/i.test(version)
      ? failWith(`unsupported SIP version ${clip(version)}`, 505)
      : failWith(`malformed SIP version "${clip(version)}"`);
  }
  if (headerProblem !== undefined) return failWith(headerProblem);
  const uri = parseUri(uriText);
  if (!uri.ok)
    return failWith(
      `Request-URI: ${uri.reason}`,
      uri.reason.startsWith('unsupported URI scheme') ? 416 : 400,
    );
  if (uri.value.scheme !== 'tel' && uri.value.headers.length > 0)
    return failWith('Request-URI must not carry headers');
  const common = readCommon(headers);
  if (!common.ok) return failWith(common.reason);
  if (common.value.cseq.method !== method)
    return failWith(`CSeq method ${clip(common.value.cseq.method)} does not match ${clip(method)}`);
  let maxForwards: number | undefined;
  const maxForwardsText = headerValue(headers, 'Max-Forwards');
  if (maxForwardsText !== undefined) {
    if (
      !/^\d{1,3}$/.test(maxForwardsText.replace(/^0+(?=\d)/, '')) ||
      Number(maxForwardsText) > 255
    ) {
      return failWith('Max-Forwards is not an integer from 0 to 255');
    }
    maxForwards = Number(maxForwardsText);
  }
  const body = readBody(headers, buffer, bodyStart, options);
  if (!body.ok) return failWith(body.reason);
  return {
    ok: true,
    value: {
      kind: 'request',
      method,
      uri: uri.value,
      uriText,
      ...(maxForwards !== undefined ? { maxForwards } : {}),
      headers,
      ...common.value,
      body: body.value,
    },
  };
}

function parseResponse(
  status: number,
  reason: string,
  headers: SipHeader[],
  headerProblem: string | undefined,
  buffer: Buffer,
  bodyStart: number,
  options: SipParseOptions,
): SipParseResult<SipMessage> {
  if (status < 100 || status > 699)
    return { ok: false, reason: `status code ${status} outside 100-699` };
  if (headerProblem !== undefined) return { ok: false, reason: headerProblem };
  const routing = readRouting(headers);
  if (routing.problem !== undefined) return { ok: false, reason: routing.problem };
  const common = readCommon(headers);
  if (!common.ok) return common;
  const body = readBody(headers, buffer, bodyStart, options);
  if (!body.ok) return body;
  return {
    ok: true,
    value: { kind: 'response', status, reason, headers, ...common.value, body: body.value },
  };
}

/** Continuation lines (starting with SP or HT) belong to the header above them. */
function unfold(raw: string[]): string[] {
  const lines: string[] = [];
  for (const line of raw) {
    if ((line.startsWith(' ') || line.startsWith('\t')) && lines.length > 1) {
      lines[lines.length - 1] = `${lines[lines.length - 1] ?? ''} ${line.trim()}`;
    } else {
      lines.push(line);
    }
  }
  return lines;
}

function readRouting(headers: readonly SipHeader[]): { via?: ViaHeader[]; problem?: string } {
  const texts = headerValues(headers, 'Via');
  if (texts.length === 0) return { problem: 'no Via header' };
  const via: ViaHeader[] = [];
  for (const text of texts) {
    const parsed = parseVia(text);
    if (!parsed.ok) {
      // A broken topmost Via leaves no address to answer to; a broken lower one can still be answered.
      if (via.length === 0) return { problem: parsed.reason };
      return { via, problem: undefined };
    }
    via.push(parsed.value);
  }
  return { via };
}

type Common = Pick<SipMessage, 'via' | 'from' | 'to' | 'callId' | 'cseq'>;

function readCommon(headers: readonly SipHeader[]): SipParseResult<Common> {
  for (const name of SINGLE_HEADERS) {
    const values = headerValues(headers, name);
    if (values.length > 1 && values.some((value) => value !== values[0])) {
      return { ok: false, reason: `more than one ${name} header` };
    }
  }
  const via: ViaHeader[] = [];
  for (const text of headerValues(headers, 'Via')) {
    const parsed = parseVia(text);
    if (!parsed.ok) return parsed;
    via.push(parsed.value);
  }
  const fromText = headerValue(headers, 'From');
  const toText = headerValue(headers, 'To');
  const callId = headerValue(headers, 'Call-ID');
  const cseqText = headerValue(headers, 'CSeq');
  if (fromText === undefined) return { ok: false, reason: 'no From header' };
  if (toText === undefined) return { ok: false, reason: 'no To header' };
  if (callId === undefined || callId.length === 0)
    return { ok: false, reason: 'no Call-ID header' };
  if (cseqText === undefined) return { ok: false, reason: 'no CSeq header' };
  if (/\s/.test(callId)) return { ok: false, reason: 'Call-ID contains white space' };
  const from = parseNameAddr(fromText);
  if (!from.ok) return { ok: false, reason: `From: ${from.reason}` };
  const to = parseNameAddr(toText);
  if (!to.ok) return { ok: false, reason: `To: ${to.reason}` };
  const cseq = parseCSeq(cseqText);
  if (!cseq.ok) return cseq;
  return { ok: true, value: { via, from: from.value, to: to.value, callId, cseq: cseq.value } };
}

function readBody(
  headers: readonly SipHeader[],
  buffer: Buffer,
  bodyStart: number,
  options: SipParseOptions,
): SipParseResult<string> {
  const available = Math.max(0, buffer.length - bodyStart);
  const lengthText = headerValue(headers, 'Content-Length');
  if (lengthText === undefined) {
    if (options.stream === true)
      return { ok: false, reason: 'no Content-Length on a stream transport' };
    return { ok: true, value: buffer.toString('utf8', bodyStart) };
  }
  if (!/^\d{1,10}$/.test(lengthText))
    return { ok: false, reason: `invalid Content-Length "${clip(lengthText)}"` };
  const length = Number(lengthText);
  if (length > available)
    return {
      ok: false,
      reason: `Content-Length ${length} is larger than the ${available} body bytes received`,
    };
  // Bytes beyond Content-Length in a datagram are discarded (RFC 3261 section 18.3).
  return { ok: true, value: buffer.toString('utf8', bodyStart, bodyStart + length) };
}
