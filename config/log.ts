/**
 * Structured logging: one JSON object per line on stdout, with correlation fields carried by
 * child loggers (session_id, turn_id, response_id, call_id, operation_id, idempotency_key, ...).
 *
 * Secrets never reach the output: fields whose names look like credentials are replaced, known
 * secret values (registered at startup from the environment) are scrubbed wherever they appear,
 * and `Authorization:` / `Bearer` material inside strings (for example a SIP message) is masked.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Readonly<Record<string, unknown>>;

const LEVELS: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };
const REDACTED = '[redacted]';
const SECRET_KEY =
  /(authorization|password|passwd|secret|api[-_]?key|token|credential|cookie|localkey|remotekey|keysalt)/i;
/** Header lines and bearer tokens inside free text (SIP messages, HTTP dumps). */
const SECRET_TEXT = [
  /((?:proxy-)?authorization\s*:\s*)[^\r\n]*/gi,
  /(bearer\s+)[A-Za-z0-9._~+/=-]+/gi,
  /(\bresponse\s*=\s*")[^"]*/gi,
  // SDES master keys in SDP (a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:<key and salt>).
  /(\binline:)[A-Za-z0-9+/=]+/gi,
];
/** Secrets shorter than this are not scrubbed by value: too likely to match ordinary text. */
const MIN_SECRET_LENGTH = 6;
const MAX_DEPTH = 6;

const knownSecrets = new Set<string>();

/** Registers a secret value (API key, digest password) so it is scrubbed from every log line. */
export function registerSecret(value: string | undefined): void {
  if (value !== undefined && value.length >= MIN_SECRET_LENGTH) knownSecrets.add(value);
}

export interface LogSink {
  write(line: string): void;
}

let stdoutGuarded = false;
const stdoutSink: LogSink = {
  write: (line) => {
    if (!stdoutGuarded) {
      // A closed stdout (a log shipper gone, a pipe to `head`) must not take the gateway down.
      process.stdout.on('error', () => {});
      stdoutGuarded = true;
    }
    process.stdout.write(line);
  },
};

export class Logger {
  private readonly fields: LogFields;
  private readonly threshold: number;
  private readonly sink: LogSink;

  constructor(options: { level?: LogLevel; fields?: LogFields; sink?: LogSink } = {}) {
    this.threshold = LEVELS[options.level ?? 'info'];
    this.fields = options.fields ?? {};
    this.sink = options.sink ?? stdoutSink;
  }

  /** A logger whose lines all carry `fields` (correlation ids of a call, a turn, an operation). */
  child(fields: LogFields): Logger {
    const level =
      (Object.keys(LEVELS) as LogLevel[]).find((l) => LEVELS[l] === this.threshold) ?? 'info';
    return new Logger({ level, fields: { ...this.fields, ...fields }, sink: this.sink });
  }

  isEnabled(level: LogLevel): boolean {
    return LEVELS[level] >= this.threshold;
  }

  debug(msg: string, fields?: LogFields): void {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.write('error', msg, fields);
  }

  private write(level: LogLevel, msg: string, fields?: LogFields): void {
    if (LEVELS[level] < this.threshold) return;
    const record = { time: new Date().toISOString(), level, msg, ...this.fields, ...fields };
    this.sink.write(`${JSON.stringify(redact(record, 0))}\n`);
  }
}

/** Returns a copy of `value` with secrets removed; exported for the tests and for audit events. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[truncated]';
  if (value instanceof Error) {
    return {
      name: value.name,
      message: scrubText(value.message),
      ...redactObject(value as unknown as Record<string, unknown>, depth),
    };
  }
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  if (Buffer.isBuffer(value)) return `[${value.length} bytes]`;
  return redactObject(value as Record<string, unknown>, depth);
}

function redactObject(value: Record<string, unknown>, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] =
      SECRET_KEY.test(key) && item !== undefined && item !== null
        ? REDACTED
        : redact(item, depth + 1);
  }
  return out;
}

function scrubText(text: string): string {
  let out = text;
  for (const pattern of SECRET_TEXT) out = out.replace(pattern, `$1${REDACTED}`);
  for (const secret of knownSecrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/** The process-wide root logger; entry points replace it once the configuration is known. */
let root = new Logger({ level: 'info' });

export function rootLogger(): Logger {
  return root;
}

export function setRootLogger(logger: Logger): void {
  root = logger;
}
