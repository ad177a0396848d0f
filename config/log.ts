/**
 * Structured logging on pino: one JSON object per line on stdout (`time` ISO 8601, `level` by
 * name, `msg`), with correlation fields carried by child loggers (session_id, turn_id,
 * response_id, call_id, operation_id, idempotency_key, ...) as flat fields of the line.
 *
 * Secrets never reach the output: fields whose names look like credentials are replaced, known
 * secret values (registered at startup from the environment) are scrubbed wherever they appear,
 * and `Authorization:` / `Bearer` material inside strings (for example a SIP message) is masked.
 * pino's own `redact` takes fixed paths, and these rules match key names at any depth and text
 * inside values, so they run as pino's `log` formatter (a line's fields), its `logMethod` hook
 * (the message), and on a child's fields once when the child is made (pino serializes bindings
 * then, and applies no formatter to a child's). With `maskCallerNumbers`, caller fields are
 * masked the same way (config/caller-mask.ts). Pinned by test/unit/config/log-redaction.test.ts.
 */
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { isCallerField, maskCaller } from './caller-mask.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Readonly<Record<string, unknown>>;

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

/**
 * Registers a secret value (API key, digest password) so it is scrubbed from every log line.
 * Child bindings are scrubbed when the child is made: register secrets before the loggers that
 * could carry them (process-runtime.ts does, at startup).
 */
export function registerSecret(value: string | undefined): void {
  if (value !== undefined && value.length >= MIN_SECRET_LENGTH) knownSecrets.add(value);
}

/** Where lines go instead of stdout (tests, benchmarks): one call per line, ending in `\n`. */
export interface LogSink {
  write(line: string): void;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  /** Fields every line carries (the process's role and gateway id). */
  readonly fields?: LogFields;
  readonly sink?: LogSink;
  /** Caller fields (`caller`, `caller_number`, ...) are masked in every line (privacy.maskCallerNumbers). */
  readonly maskCallerNumbers?: boolean;
}

interface Output {
  readonly pino: PinoLogger<never, boolean>;
  readonly rules: ScrubRules;
}

/** The output a child writes to; a module-private option, so callers cannot name it. */
const ADOPT = Symbol('child output');
type ConstructorOptions = LoggerOptions & { readonly [ADOPT]?: Output };

export class Logger {
  private readonly output: Output;

  constructor(options: ConstructorOptions = {}) {
    this.output = options[ADOPT] ?? (isDefault(options) ? defaultOutput() : createOutput(options));
  }

  private get out(): PinoLogger<never, boolean> {
    return this.output.pino;
  }

  /** A logger whose lines all carry `fields` (correlation ids of a call, a turn, an operation). */
  child(fields: LogFields): Logger {
    const { pino: parent, rules } = this.output;
    return new Logger({ [ADOPT]: { pino: parent.child(scrubObject(fields, 0, rules)), rules } });
  }

  isEnabled(level: LogLevel): boolean {
    return this.out.isLevelEnabled(level);
  }

  debug(msg: string, fields?: LogFields): void {
    if (fields === undefined) this.out.debug(msg);
    else this.out.debug(fields, msg);
  }
  info(msg: string, fields?: LogFields): void {
    if (fields === undefined) this.out.info(msg);
    else this.out.info(fields, msg);
  }
  warn(msg: string, fields?: LogFields): void {
    if (fields === undefined) this.out.warn(msg);
    else this.out.warn(fields, msg);
  }
  error(msg: string, fields?: LogFields): void {
    if (fields === undefined) this.out.error(msg);
    else this.out.error(fields, msg);
  }
}

function isDefault(options: LoggerOptions): boolean {
  return (
    (options.level ?? 'info') === 'info' &&
    options.fields === undefined &&
    options.sink === undefined &&
    options.maskCallerNumbers !== true
  );
}

/** `new Logger()` (a subclass's `super()`, for one) shares one pino instance instead of making one. */
let sharedDefault: Output | undefined;

function defaultOutput(): Output {
  sharedDefault ??= createOutput({});
  return sharedDefault;
}

function createOutput(options: LoggerOptions): Output {
  const rules: ScrubRules = { maskCallers: options.maskCallerNumbers === true };
  return { pino: createPino(options, rules), rules };
}

function createPino(options: LoggerOptions, rules: ScrubRules): PinoLogger<never, boolean> {
  return pino(
    {
      level: options.level ?? 'info',
      base: scrubObject(options.fields ?? {}, 0, rules),
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      // Values are scrubbed by the formatters; pino's `err` serializer would reshape them again.
      serializers: { err: (value: unknown) => value },
      formatters: {
        level: (label) => ({ level: label }),
        log: (fields) => scrubObject(fields, 0, rules),
      },
      hooks: {
        logMethod(args, write) {
          const [first, second] = args as unknown[];
          if (typeof first === 'string') args[0] = scrubText(first);
          else if (typeof second === 'string') args[1] = scrubText(second);
          write.apply(this, args);
        },
      },
    },
    options.sink ?? stdoutDestination(),
  );
}

let stdout: DestinationStream | undefined;

/**
 * Synchronous writes to fd 1, so a crash loses no line. A closed stdout (a log shipper gone, a
 * pipe to `head`) must not take the gateway down: pino stops writing on EPIPE, and any other
 * write error stops logging the same way instead of being thrown.
 */
function stdoutDestination(): DestinationStream {
  if (stdout !== undefined) return stdout;
  const destination = pino.destination({ dest: 1, sync: true });
  destination.on('error', () => {
    destination.write = () => true;
  });
  stdout = destination;
  return destination;
}

interface ScrubRules {
  readonly maskCallers: boolean;
}

const SHOW_ALL: ScrubRules = { maskCallers: false };

/** Returns a copy of `value` with secrets removed; exported for the tests and for audit events. */
export function redact(value: unknown, depth = 0): unknown {
  return scrub(value, depth, SHOW_ALL);
}

function scrub(value: unknown, depth: number, rules: ScrubRules): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[truncated]';
  if (value instanceof Error) {
    return {
      name: value.name,
      message: scrubText(value.message),
      ...scrubObject(value as unknown as Record<string, unknown>, depth, rules),
    };
  }
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1, rules));
  if (Buffer.isBuffer(value)) return `[${value.length} bytes]`;
  return scrubObject(value as Record<string, unknown>, depth, rules);
}

function scrubObject(
  value: Readonly<Record<string, unknown>>,
  depth: number,
  rules: ScrubRules,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (SECRET_KEY.test(key) && item !== undefined && item !== null) out[key] = REDACTED;
    else if (rules.maskCallers && typeof item === 'string' && isCallerField(key))
      out[key] = maskCaller(scrubText(item));
    else out[key] = scrub(item, depth + 1, rules);
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
