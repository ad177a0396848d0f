/**
 * The operator API's bearer tokens: named, read from the environment variables the configuration
 * names, each with its scopes. A presented token is compared with every configured one in constant
 * time over SHA-256 digests, so neither its length nor which token it nearly matched leaks
 * (test/unit/http/operator-tokens.test.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../../config/load.ts';
import type { Config, OperatorScope } from '../../config/schema.ts';

/** Shorter tokens are refused at start: a guessable token is no authentication. */
export const MIN_TOKEN_LENGTH = 16;

export interface OperatorToken {
  readonly name: string;
  readonly scopes: ReadonlySet<OperatorScope>;
}

/** What a request's Authorization header proves. */
export type Authentication =
  | { readonly kind: 'token'; readonly token: OperatorToken }
  | { readonly kind: 'refused'; readonly reason: string };

interface StoredToken extends OperatorToken {
  readonly digest: Buffer;
}

export class OperatorTokens {
  private readonly tokens: readonly StoredToken[];

  constructor(
    tokens: readonly { name: string; secret: string; scopes: readonly OperatorScope[] }[],
  ) {
    this.tokens = tokens.map((token) => ({
      name: token.name,
      scopes: new Set(token.scopes),
      digest: digest(token.secret),
    }));
  }

  get size(): number {
    return this.tokens.length;
  }

  /** Checks an `Authorization` header value. */
  authenticate(header: string | undefined): Authentication {
    if (header === undefined || header === '')
      return { kind: 'refused', reason: 'no Authorization header' };
    const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    if (!match?.[1]) return { kind: 'refused', reason: 'not a bearer token' };
    const presented = digest(match[1]);
    // Every token is compared, with no early exit, so the time taken does not say which matched.
    let found: StoredToken | undefined;
    for (const token of this.tokens) {
      if (timingSafeEqual(presented, token.digest) && found === undefined) found = token;
    }
    return found === undefined
      ? { kind: 'refused', reason: 'unknown token' }
      : { kind: 'token', token: found };
  }
}

function digest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/**
 * Reads each configured token's secret from its environment variable.
 * @throws ConfigError listing every token whose variable is unset, empty or too short.
 */
export function readOperatorTokens(config: Config, env: NodeJS.ProcessEnv): OperatorTokens {
  const problems: string[] = [];
  const tokens = config.http.operator.tokens.map((token, i) => {
    const secret = env[token.tokenEnv] ?? '';
    const at = `http.operator.tokens[${i}] (${token.name})`;
    if (secret === '')
      problems.push(`${at}: the environment variable ${token.tokenEnv} is not set`);
    else if (secret.length < MIN_TOKEN_LENGTH)
      problems.push(`${at}: ${token.tokenEnv} is shorter than ${MIN_TOKEN_LENGTH} characters`);
    else if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(secret))
      problems.push(`${at}: ${token.tokenEnv} holds characters a bearer token cannot carry`);
    return { name: token.name, secret, scopes: token.scopes };
  });
  if (problems.length > 0) throw new ConfigError('environment', problems);
  return new OperatorTokens(tokens);
}
