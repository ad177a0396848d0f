import { describe, expect, it } from 'vitest';
import { Logger, redact, registerSecret } from '../../../config/log.ts';

function capture(level: 'debug' | 'info' = 'info'): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
  raw: () => string;
} {
  let text = '';
  const logger = new Logger({ level, sink: { write: (line) => (text += line) } });
  return {
    logger,
    raw: () => text,
    lines: () =>
      text
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('when a log line carries secrets', () => {
  it('should replace credential-named fields at any depth', () => {
    const { logger, raw } = capture();
    logger.info('provider call', {
      apiKey: 'sk-live-abcdef123456',
      headers: { Authorization: 'Bearer abc.def.ghi', 'x-request-id': 'r1' },
      trunk: { digest: { username: 'pbx', password: 'p4ssw0rd!!' } },
      webhook_secret: 'whsec_0123456789',
    });
    const text = raw();
    for (const secret of ['sk-live-abcdef123456', 'abc.def.ghi', 'p4ssw0rd!!', 'whsec_0123456789'])
      expect(text).not.toContain(secret);
    expect(text).toContain('"x-request-id":"r1"');
    expect(text).toContain('"username":"pbx"');
  });

  it('should scrub registered secret values wherever they appear, even in free text', () => {
    registerSecret('OPENAI-KEY-0123456789abcdef');
    const { logger, raw } = capture();
    logger.warn('connect failed: server said key OPENAI-KEY-0123456789abcdef is invalid', {
      detail: ['x OPENAI-KEY-0123456789abcdef y'],
    });
    expect(raw()).not.toContain('OPENAI-KEY-0123456789abcdef');
    expect(raw()).toContain('[redacted]');
  });

  it('should mask Authorization headers and digest responses inside a logged SIP message', () => {
    const sip = [
      'INVITE sip:1000@127.0.0.1 SIP/2.0',
      'Authorization: Digest username="pbx", realm="demo", nonce="n1", uri="sip:1000@127.0.0.1", response="6629fae49393a05397450978507c4ef1"',
      'Proxy-Authorization: Digest username="x", response="0123456789abcdef"',
      'Call-ID: abc',
      '',
    ].join('\r\n');
    const { logger, raw } = capture();
    logger.info('received', { message: sip });
    expect(raw()).not.toContain('6629fae49393a05397450978507c4ef1');
    expect(raw()).not.toContain('0123456789abcdef');
    expect(raw()).toContain('Call-ID: abc');
  });

  it('should redact an Error whose message holds a bearer token', () => {
    const out = redact(new Error('401 with Bearer tok_ABCDEF123')) as { message: string };
    expect(out.message).toBe('401 with Bearer [redacted]');
  });
});

describe('when lines are written', () => {
  it('should write one JSON object per line with correlation fields from child loggers', () => {
    const { logger, lines } = capture();
    const call = logger
      .child({ session_id: 's1' })
      .child({ operation_id: 'op_1', idempotency_key: 'k1' });
    call.info('admitted', { turn_id: 't3' });
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'admitted',
        session_id: 's1',
        operation_id: 'op_1',
        idempotency_key: 'k1',
        turn_id: 't3',
      }),
    ]);
  });

  it('should drop lines below the configured level', () => {
    const { logger, lines } = capture('info');
    logger.debug('noise');
    logger.child({ a: 1 }).debug('noise');
    logger.error('kept');
    expect(lines().map((l) => l.msg)).toEqual(['kept']);
  });
});
