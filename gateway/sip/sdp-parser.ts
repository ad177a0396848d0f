/**
 * Parses and serializes SDP (RFC 4566). Pure; unknown lines are kept as attributes or skipped,
 * malformed required lines give a failure with the line that was wrong.
 */
import type { SipParseResult } from './message-types.ts';
import type {
  SdpAttribute,
  SdpConnection,
  SdpDirection,
  SdpOrigin,
  SdpRtpMap,
  SdpSession,
} from './sdp-types.ts';

const DIRECTIONS: ReadonlySet<string> = new Set(['sendrecv', 'sendonly', 'recvonly', 'inactive']);
/** Far more m= lines than any real offer; a cap keeps a hostile body from costing much. */
const MAX_MEDIA = 16;
const MAX_LINES = 512;

/**
 * A peer's line quoted in a failure reason, which may end up in a Warning header and a log: short,
 * printable ASCII only (a lone CR survives the split on LF), anything else shown as '?'.
 */
const clipLine = (line: string): string => {
  const printable = line.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 60 ? `${printable.slice(0, 60)}...` : printable;
};

interface MutableMedia {
  type: string;
  port: number;
  portCount?: number;
  protocol: string;
  formats: string[];
  connection?: SdpConnection;
  rtpmaps: SdpRtpMap[];
  fmtp: Record<number, string>;
  ptime?: number;
  direction?: SdpDirection;
  attributes: SdpAttribute[];
}

export function parseSdp(text: string): SipParseResult<SdpSession> {
  const lines = text.split(/\r?\n/).filter((line) => line.length > 0);
  if (lines.length > MAX_LINES) return { ok: false, reason: `more than ${MAX_LINES} SDP lines` };
  if (lines[0] !== 'v=0') return { ok: false, reason: 'SDP does not start with v=0' };
  let origin: SdpOrigin | undefined;
  let sessionName = '';
  let connection: SdpConnection | undefined;
  let direction: SdpDirection | undefined;
  const attributes: SdpAttribute[] = [];
  const media: MutableMedia[] = [];
  let current: MutableMedia | undefined;
  for (const line of lines.slice(1)) {
    if (line.length < 2 || line[1] !== '=')
      return { ok: false, reason: `malformed SDP line "${clipLine(line)}"` };
    const type = line[0];
    const value = line.slice(2).trim();
    switch (type) {
      case 'o': {
        const parts = value.split(/\s+/);
        if (parts.length !== 6)
          return { ok: false, reason: `malformed o= line "${clipLine(line)}"` };
        const [
          username = '',
          sessionId = '',
          sessionVersion = '',
          netType = '',
          addrType = '',
          address = '',
        ] = parts;
        origin = { username, sessionId, sessionVersion, netType, addrType, address };
        break;
      }
      case 's':
        sessionName = value;
        break;
      case 'c': {
        const parsed = parseConnection(value);
        if (parsed === undefined)
          return { ok: false, reason: `malformed c= line "${clipLine(line)}"` };
        if (current !== undefined) current.connection = parsed;
        else connection = parsed;
        break;
      }
      case 'm': {
        if (media.length >= MAX_MEDIA)
          return { ok: false, reason: `more than ${MAX_MEDIA} m= lines` };
        const match = /^(\S+) (\d{1,5})(?:\/(\d{1,5}))? (\S+)((?: \S+)*)$/.exec(value);
        if (match === null || Number(match[2]) > 65535)
          return { ok: false, reason: `malformed m= line "${clipLine(line)}"` };
        current = {
          type: match[1] ?? '',
          port: Number(match[2]),
          ...(match[3] !== undefined ? { portCount: Number(match[3]) } : {}),
          protocol: match[4] ?? '',
          formats: (match[5] ?? '')
            .trim()
            .split(' ')
            .filter((f) => f.length > 0),
          rtpmaps: [],
          fmtp: {},
          attributes: [],
        };
        media.push(current);
        break;
      }
      case 'a': {
        const colon = value.indexOf(':');
        const name = colon >= 0 ? value.slice(0, colon) : value;
        const attrValue = colon >= 0 ? value.slice(colon + 1) : null;
        if (DIRECTIONS.has(name) && attrValue === null) {
          if (current !== undefined) current.direction = name as SdpDirection;
          else direction = name as SdpDirection;
          break;
        }
        if (current === undefined) {
          attributes.push([name, attrValue]);
          break;
        }
        if (name === 'rtpmap' && attrValue !== null) {
          const rtpmap = parseRtpMap(attrValue);
          if (rtpmap === undefined)
            return { ok: false, reason: `malformed rtpmap "${clipLine(line)}"` };
          current.rtpmaps.push(rtpmap);
        } else if (name === 'fmtp' && attrValue !== null) {
          const match = /^(\d{1,3})\s+(.*)$/.exec(attrValue);
          if (match !== null) current.fmtp[Number(match[1])] = match[2] ?? '';
        } else if (name === 'ptime' && attrValue !== null && /^\d{1,4}(\.\d+)?$/.test(attrValue)) {
          current.ptime = Number(attrValue);
        } else {
          current.attributes.push([name, attrValue]);
        }
        break;
      }
      default:
        // t=, b=, k=, i=, u=, e=, p=, z=, r=: not needed to negotiate audio.
        break;
    }
  }
  if (origin === undefined) return { ok: false, reason: 'SDP has no o= line' };
  return {
    ok: true,
    value: {
      origin,
      sessionName,
      ...(connection !== undefined ? { connection } : {}),
      ...(direction !== undefined ? { direction } : {}),
      attributes,
      media,
    },
  };
}

function parseConnection(value: string): SdpConnection | undefined {
  const match = /^(\S+) (IP4|IP6) (\S+)$/.exec(value);
  if (match === null) return undefined;
  // A multicast TTL or count (`/127`) is not something a gateway answers; keep the address.
  const address = (match[3] ?? '').split('/')[0] ?? '';
  if (address.length === 0) return undefined;
  return { netType: match[1] ?? 'IN', addrType: match[2] as 'IP4' | 'IP6', address };
}

function parseRtpMap(value: string): SdpRtpMap | undefined {
  const match = /^(\d{1,3})\s+([^/\s]+)\/(\d{1,6})(?:\/(\d{1,2}))?\s*$/.exec(value);
  if (match === null || Number(match[1]) > 127) return undefined;
  return {
    payloadType: Number(match[1]),
    encoding: match[2] ?? '',
    clockRate: Number(match[3]),
    ...(match[4] !== undefined ? { channels: Number(match[4]) } : {}),
  };
}

export function serializeSdp(session: SdpSession): string {
  const o = session.origin;
  const lines = [
    'v=0',
    `o=${o.username} ${o.sessionId} ${o.sessionVersion} ${o.netType} ${o.addrType} ${o.address}`,
    `s=${session.sessionName || '-'}`,
  ];
  if (session.connection !== undefined) lines.push(formatConnection(session.connection));
  lines.push('t=0 0');
  for (const [name, value] of session.attributes)
    lines.push(value === null ? `a=${name}` : `a=${name}:${value}`);
  if (session.direction !== undefined) lines.push(`a=${session.direction}`);
  for (const m of session.media) {
    lines.push(
      `m=${m.type} ${m.port}${m.portCount !== undefined ? `/${m.portCount}` : ''} ${m.protocol} ${m.formats.join(' ')}`,
    );
    if (m.connection !== undefined) lines.push(formatConnection(m.connection));
    for (const map of m.rtpmaps) {
      lines.push(
        `a=rtpmap:${map.payloadType} ${map.encoding}/${map.clockRate}${map.channels !== undefined ? `/${map.channels}` : ''}`,
      );
    }
    for (const [pt, params] of Object.entries(m.fmtp)) lines.push(`a=fmtp:${pt} ${params}`);
    if (m.ptime !== undefined) lines.push(`a=ptime:${m.ptime}`);
    for (const [name, value] of m.attributes)
      lines.push(value === null ? `a=${name}` : `a=${name}:${value}`);
    if (m.direction !== undefined) lines.push(`a=${m.direction}`);
  }
  return `${lines.join('\r\n')}\r\n`;
}

function formatConnection(c: SdpConnection): string {
  return `c=${c.netType} ${c.addrType} ${c.address}`;
}
