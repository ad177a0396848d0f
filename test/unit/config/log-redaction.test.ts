import { describe, expect, it } from 'vitest';
import { Logger, redact, registerSecret } from '../../../config/log.ts';

function capture(
  level: 'debug' | 'info' = 'info',
  options: { maskCallerNumbers?: boolean } = {},
): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
  raw: () => string;
} {
  let text = '';
  const logger = new Logger({ level, ...options, sink: { write: (line) => (text += line) } });
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

  it('should scrub the fields a child logger carries, as it does a line', () => {
    registerSecret('child-secret-0123456789');
    const { logger, raw, lines } = capture();
    logger
      .child({ drachtio: { secret: 'cymru-0123' }, peer: 'x child-secret-0123456789 y' })
      .info('connected', { auth: 'Authorization: Digest response="0f0f0f0f"' });
    expect(raw()).not.toContain('cymru-0123');
    expect(raw()).not.toContain('child-secret-0123456789');
    expect(raw()).not.toContain('0f0f0f0f');
    expect(lines()[0]).toMatchObject({
      drachtio: { secret: '[redacted]' },
      peer: 'x [redacted] y',
    });
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

  it('should give each line an ISO time, the level by name and the message', () => {
    const { logger, lines } = capture('debug');
    logger.debug('one');
    logger.warn('two', { detail: undefined, count: 2 });
    const [first, second] = lines();
    expect(Object.keys(first ?? {}).sort()).toEqual(['level', 'msg', 'time']);
    expect(first).toMatchObject({ level: 'debug', msg: 'one' });
    expect(new Date(String(first?.time)).toISOString()).toBe(first?.time);
    expect(second).toEqual({ time: second?.time, level: 'warn', msg: 'two', count: 2 });
  });

  it('should write an Error field as its name and message', () => {
    const { logger, lines } = capture();
    logger.error('failed', { error: new TypeError('boom') });
    expect(lines()[0]?.error).toEqual({ name: 'TypeError', message: 'boom' });
  });

  it('should answer isEnabled by the configured level, for children too', () => {
    const { logger } = capture('info');
    expect(logger.isEnabled('debug')).toBe(false);
    expect(logger.child({ a: 1 }).isEnabled('info')).toBe(true);
  });

  it('should drop lines below the configured level', () => {
    const { logger, lines } = capture('info');
    logger.debug('noise');
    logger.child({ a: 1 }).debug('noise');
    logger.error('kept');
    expect(lines().map((l) => l.msg)).toEqual(['kept']);
  });
});

describe('when caller numbers are masked (privacy.maskCallerNumbers)', () => {
  it('should mask caller fields of child loggers and of lines, at any depth', () => {
    const { logger, raw, lines } = capture('info', { maskCallerNumbers: true });
    logger.child({ session_id: 's1', caller: '+34671234512' }).info('operation admitted', {
      operation: { caller: '+34671234512', caller_verified: false },
    });
    expect(raw()).not.toContain('+34671234512');
    expect(lines()[0]).toMatchObject({
      session_id: 's1',
      caller: '+3467****12',
      operation: { caller: '+3467****12', caller_verified: false },
    });
  });

  it('should leave caller fields as they are when masking is off', () => {
    const { logger, lines } = capture();
    logger.child({ caller: '+34671234512' }).info('answered');
    expect(lines()[0]?.caller).toBe('+34671234512');
  });
});
