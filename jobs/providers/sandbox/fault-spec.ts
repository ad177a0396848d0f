/**
 * Fault directives the sandbox understands, from the X-Sandbox-Fault header or from a rule.
 * A spec is a comma-separated list: `latency=300,commit-then-timeout`, `error=503`,
 * `drop-after-commit`, `garbage-after-commit`, `drop-before-commit`, `cancel=off`,
 * `lookup=processing`. Later directives override earlier ones; the header overrides rules.
 */

export interface FaultSpec {
  /** Held before the effect is committed; the request can be cancelled meanwhile. */
  readonly latencyMs?: number;
  /** Answered with this 5xx status before anything is committed. */
  readonly errorStatus?: number;
  /** The socket is destroyed before anything is committed. */
  readonly dropBeforeCommit?: boolean;
  /** What happens to the answer after the effect is committed. */
  readonly afterCommit?: 'timeout' | 'drop' | 'garbage';
  /** How long `commit-then-timeout` holds the answer. */
  readonly holdMs?: number;
  /** `off`: cancel answers not_supported; `deferred`: cancel answers pending and applies at commit time. */
  readonly cancel?: 'on' | 'off' | 'deferred';
  /** `processing`: lookups of this reference answer "still processing". */
  readonly lookup?: 'processing';
}

/** Longer than any provider timeout in use, so the client always gives up first. */
export const DEFAULT_HOLD_MS = 60_000;
/** A fault may not hold a request longer than this: a typo must not hang a test run. */
const MAX_FAULT_MS = 600_000;

export class FaultSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FaultSpecError';
  }
}

export function parseFaultSpec(text: string): FaultSpec {
  const spec: { -readonly [K in keyof FaultSpec]: FaultSpec[K] } = {};
  for (const raw of text.split(',')) {
    const directive = raw.trim();
    if (directive === '') continue;
    const eq = directive.indexOf('=');
    const name = (eq < 0 ? directive : directive.slice(0, eq)).trim().toLowerCase();
    const value = eq < 0 ? undefined : directive.slice(eq + 1).trim();
    switch (name) {
      case 'latency':
        spec.latencyMs = duration(name, value);
        break;
      case 'error': {
        const status = value === undefined ? 503 : Number(value);
        if (!Number.isInteger(status) || status < 500 || status > 599)
          throw new FaultSpecError('error must be a 5xx status');
        spec.errorStatus = status;
        break;
      }
      case 'drop-before-commit':
        spec.dropBeforeCommit = true;
        break;
      case 'commit-then-timeout':
        spec.afterCommit = 'timeout';
        if (value !== undefined) spec.holdMs = duration(name, value);
        break;
      case 'drop-after-commit':
        spec.afterCommit = 'drop';
        break;
      case 'garbage-after-commit':
        spec.afterCommit = 'garbage';
        break;
      case 'cancel':
        if (value !== 'on' && value !== 'off' && value !== 'deferred')
          throw new FaultSpecError('cancel must be on, off or deferred');
        spec.cancel = value;
        break;
      case 'lookup':
        if (value !== 'processing') throw new FaultSpecError('lookup must be processing');
        spec.lookup = value;
        break;
      default:
        throw new FaultSpecError(`unknown fault directive ${name}`);
    }
  }
  return spec;
}

const NO_FAULT: FaultSpec = Object.freeze({});

export function mergeFaultSpecs(...specs: readonly FaultSpec[]): FaultSpec {
  // Most requests carry no fault at all: no new object for them.
  const given = specs.filter((spec) => Object.keys(spec).length > 0);
  if (given.length === 0) return NO_FAULT;
  if (given.length === 1) return given[0] as FaultSpec;
  return Object.assign({}, ...given) as FaultSpec;
}

function duration(name: string, value: string | undefined): number {
  const ms = Number(value);
  if (value === undefined || !Number.isInteger(ms) || ms < 0 || ms > MAX_FAULT_MS) {
    throw new FaultSpecError(`${name} needs a duration in ms between 0 and ${MAX_FAULT_MS}`);
  }
  return ms;
}
