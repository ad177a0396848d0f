import { describe, expect, it } from 'vitest';
import { headerValue, headerValues } from '../../../gateway/sip/header-names.ts';
import { parseNameAddr, parseUri } from '../../../gateway/sip/header-parser.ts';
import { buildResponse, stampReceived } from '../../../gateway/sip/message-factory.ts';
import { parseSipMessage } from '../../../gateway/sip/message-parser.ts';
import {
  formatNameAddr,
  formatUri,
  serializeMessage,
  serializeResponse,
} from '../../../gateway/sip/message-serializer.ts';
import type { SipRequest } from '../../../gateway/sip/message-types.ts';

const INVITE = [
  'INVITE sip:100@gw SIP/2.0',
  'v: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bKabc;rport, SIP/2.0/TCP proxy;branch=z9hG4bKp',
  'Max-Forwards: 70',
  't: <sip:100@gw>',
  'f: "A" <sip:a@h>;tag=ft',
  'i: cid-1',
  'CSeq: 7 INVITE',
  'c: application/sdp',
  'l: 5',
  '',
  'hello',
].join('\r\n');

function request(text: string): SipRequest {
  const result = parseSipMessage(text);
  if (!result.ok || result.value.kind !== 'request') throw new Error('bad fixture');
  return result.value;
}

describe('when a parsed message is serialized and parsed again', () => {
  it('should keep every header value and the body, in long form with a correct Content-Length', () => {
    const first = request(INVITE);
    const wire = serializeMessage(first).toString();
    expect(wire).toContain('\r\nCall-ID: cid-1\r\n');
    expect(wire).toContain('\r\nContent-Length: 5\r\n\r\nhello');
    const second = request(wire);
    expect(second.headers).toEqual(
      first.headers
        .filter((h) => h.name !== 'Content-Length')
        .concat([{ name: 'Content-Length', value: '5' }]),
    );
    expect(second.body).toBe('hello');
  });

  it('should count Content-Length in bytes, not characters', () => {
    const wire = serializeResponse({
      status: 200,
      reason: 'OK',
      headers: [],
      body: 'é€',
    }).toString();
    expect(wire).toContain('Content-Length: 5\r\n');
  });
});

describe('when URIs and name-addrs are formatted', () => {
  it.each([
    'sip:alice@example.com:5070;transport=tcp',
    'sips:[2001:db8::1];lr',
    'tel:+15551234;phone-context=x',
    'sip:%2B1%20x@h',
  ])('should round-trip %s', (text) => {
    const parsed = parseUri(text);
    if (!parsed.ok) throw new Error(parsed.reason);
    const again = parseUri(formatUri(parsed.value));
    expect(again.ok && again.value).toEqual(parsed.value);
  });

  it('should quote and escape display names', () => {
    const parsed = parseNameAddr('"Say \\"hi\\"" <sip:x@y>;tag=1');
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(formatNameAddr(parsed.value)).toBe('"Say \\"hi\\"" <sip:x@y>;tag=1');
  });
});

describe('when a response is built for a request', () => {
  it('should copy every Via, From, Call-ID and CSeq, and add the To tag', () => {
    const response = buildResponse(request(INVITE), 180, { toTag: 'tt' });
    expect(headerValues(response.headers, 'Via')).toHaveLength(2);
    expect(headerValue(response.headers, 'To')).toBe('<sip:100@gw>;tag=tt');
    expect(headerValue(response.headers, 'From')).toBe('"A" <sip:a@h>;tag=ft');
    expect(headerValue(response.headers, 'CSeq')).toBe('7 INVITE');
    expect(response.reason).toBe('Ringing');
  });

  it('should not add a To tag to 100 Trying', () => {
    expect(headerValue(buildResponse(request(INVITE), 100, { toTag: 'tt' }).headers, 'To')).toBe(
      '<sip:100@gw>',
    );
  });
});

describe('when a request arrives from behind a NAT', () => {
  it('should stamp received and rport on the topmost Via only (RFC 3581)', () => {
    const stamped = stampReceived(request(INVITE), '192.0.2.50', 40000);
    expect(headerValues(stamped.headers, 'Via')[0]).toBe(
      'SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bKabc;received=192.0.2.50;rport=40000',
    );
    expect(headerValues(stamped.headers, 'Via')[1]).toBe('SIP/2.0/TCP proxy;branch=z9hG4bKp');
    expect(stamped.via[0]).toMatchObject({ received: '192.0.2.50', rport: 40000 });
  });
});
