/**
 * Text from the peer that callgate quotes back in a header: the Warning of a 488 names the SDP line
 * that was wrong. A lone CR survives SDP's split into lines; put into the Warning as it was, it ends
 * the header early and what follows reads as a header of the peer's choosing. Over UDP on loopback
 * for the INVITE and the re-INVITE, and for anything else at the serializer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { warningValue } from '../../../gateway/sip/message-factory.ts';
import { serializeResponse } from '../../../gateway/sip/message-serializer.ts';
import { confirmedCall, startBuiltin, type BuiltinHarness } from './builtin-harness.ts';

let h: BuiltinHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** An offer whose m= line carries a lone CR and, after it, what would be a header line. */
const INJECTING_SDP =
  'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio x\rX-Injected: yes\u0000\r\n';

/** Every line of the head, split the way the most lenient peer would: on CR or LF alone. */
const headLines = (response: string): string[] =>
  (response.split('\r\n\r\n')[0] ?? '').split(/\r\n|\r|\n/);

describe('when an offer line with control characters is quoted in a 488 Warning', () => {
  it('should keep the Warning on one line and add no header to the INVITE answer', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `warning-invite-${Date.now()}`;
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        headers: { 'Content-Type': 'application/sdp' },
        body: INJECTING_SDP,
      }),
      harness.port,
    );
    const rejected = await harness.peer.waitFor(callId, /^SIP\/2\.0 488 /);
    expect(headLines(rejected).filter((line) => line.startsWith('X-Injected'))).toEqual([]);
    expect(headLines(rejected)).toContain(
      `Warning: 399 callgate "malformed m= line 'm=audio x?X-Injected: yes?'"`,
    );
  });

  it('should do the same in the answer to a re-INVITE', async () => {
    const harness = await startBuiltin();
    h = harness;
    const callId = `warning-reinvite-${Date.now()}`;
    const { toTag } = await confirmedCall(harness, callId);
    harness.peer.send(
      harness.peer.request('INVITE', {
        callId,
        toTag,
        cseq: 2,
        headers: { 'Content-Type': 'application/sdp' },
        body: INJECTING_SDP,
      }),
      harness.port,
    );
    const rejected = await harness.peer.waitFor(callId, /^SIP\/2\.0 488 /);
    expect(headLines(rejected).filter((line) => line.startsWith('X-Injected'))).toEqual([]);
    expect(headLines(rejected)).toContain(
      `Warning: 399 callgate "malformed m= line 'm=audio x?X-Injected: yes?'"`,
    );
  });
});

describe('when a Warning is built from any text', () => {
  it.each([
    ['CR and LF', 'bad\r\nX-Injected: yes', '399 callgate "bad  X-Injected: yes"'],
    ['a lone CR', 'bad\rX', '399 callgate "bad X"'],
    ['NUL, ESC and DEL', 'a\u0000b\u001bc\u007fd', '399 callgate "a b c d"'],
    ['quotes and backslashes', 'say "hi" \\o/', `399 callgate "say 'hi' 'o/"`],
    ['text beyond 120 characters', 'x'.repeat(200), `399 callgate "${'x'.repeat(120)}..."`],
  ])('should quote %s safely', (_name, text, expected) => {
    expect(warningValue(text)).toBe(expected);
  });
});

describe('when a header value or reason phrase reaching the serializer holds a line break', () => {
  it('should write it on one line', () => {
    const wire = serializeResponse({
      status: 400,
      reason: 'Bad\r\nX-Reason: 1',
      headers: [{ name: 'Warning', value: '399 x "a\r\nX-Injected: yes"' }],
    }).toString();
    expect(headLines(wire)).toEqual([
      'SIP/2.0 400 Bad  X-Reason: 1',
      'Warning: 399 x "a  X-Injected: yes"',
      'Content-Length: 0',
    ]);
  });
});
