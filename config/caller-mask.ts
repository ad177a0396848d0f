/**
 * Caller numbers as an operator sees them when `privacy.maskCallerNumbers` is on: in log lines and
 * in the calls API. Only what is shown is masked; the call record, the operation and the headers
 * sent to a system of record (X-Callgate-Caller) keep the real number, which the business needs.
 * Pure: no I/O. Pinned by test/unit/config/caller-mask.test.ts.
 */

const MASK = '****';
/** Numbers shorter than this are hidden whole: keeping two digits of five shows most of it. */
const MIN_DIGITS_FOR_TAIL = 6;
/** From this length the number is a full one and its first digits (country, area) are kept too. */
const MIN_DIGITS_FOR_HEAD = 10;
const HEAD_DIGITS = 4;
const TAIL_DIGITS = 2;

/** Field names that hold a caller's number or SIP user, wherever they appear in a value. */
const CALLER_FIELD = /^caller(?:[-_]?(?:number|id|uri|user))?$/i;
const DIALLED = /^\+?[\d\s().-]+$/;
const URI_USER = /\b((?:sips?|tel):)([^@;>\s]+)/gi;
const DISPLAY_NAME = /"[^"]*"/g;
const MAX_DEPTH = 8;

/**
 * `+34671234512` -> `+3467****12`, `5551234` -> `****34`, `1000` -> `****`, a SIP user name
 * (`alice`) -> `****`; inside a URI (`sip:+34671234512@trunk`) only the user part is masked, and
 * a quoted display name is hidden whole.
 */
export function maskCaller(caller: string): string {
  if (/(?:sips?|tel):/i.test(caller)) {
    return caller
      .replace(DISPLAY_NAME, `"${MASK}"`)
      .replace(URI_USER, (_, scheme: string, user: string) => `${scheme}${maskUser(user)}`);
  }
  return maskUser(caller);
}

function maskUser(user: string): string {
  if (user === '') return '';
  if (!DIALLED.test(user)) return MASK;
  const digits = user.replace(/\D/g, '');
  if (digits.length < MIN_DIGITS_FOR_TAIL) return MASK;
  const head =
    digits.length >= MIN_DIGITS_FOR_HEAD
      ? `${user.trimStart().startsWith('+') ? '+' : ''}${digits.slice(0, HEAD_DIGITS)}`
      : '';
  return `${head}${MASK}${digits.slice(-TAIL_DIGITS)}`;
}

/** True for a field name that holds a caller (`caller`, `caller_number`, `callerId`, ...). */
export function isCallerField(key: string): boolean {
  return CALLER_FIELD.test(key);
}

/** A copy of `value` whose caller fields (at any depth) are masked; other values are unchanged. */
export function maskCallerFields<T>(value: T): T {
  return maskFields(value, 0) as T;
}

function maskFields(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((item) => maskFields(item, depth + 1));
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] =
      typeof item === 'string' && isCallerField(key)
        ? maskCaller(item)
        : maskFields(item, depth + 1);
  }
  return out;
}

function isPlainObject(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
