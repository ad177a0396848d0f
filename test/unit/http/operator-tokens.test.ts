import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../config/load.ts';
import { OperatorTokens, readOperatorTokens } from '../../../jobs/http/operator-tokens.ts';

const A = 'token-a-0123456789abcdef';
const B = 'token-b-0123456789abcdef';
const tokens = new OperatorTokens([
  { name: 'a', secret: A, scopes: ['operations:read'] },
  { name: 'b', secret: B, scopes: ['admin'] },
]);

describe('when an Authorization header is checked', () => {
  it.each([
    [undefined, 'no Authorization header'],
    ['', 'no Authorization header'],
    [`Basic ${A}`, 'not a bearer token'],
    ['Bearer', 'not a bearer token'],
    ['Bearer a b', 'not a bearer token'],
    [`Bearer ${A.slice(0, -1)}`, 'unknown token'],
    [`Bearer ${A}0`, 'unknown token'],
    [`Bearer ${A.toUpperCase()}`, 'unknown token'],
  ])('should refuse %j (%s)', (header, reason) => {
    expect(tokens.authenticate(header)).toEqual({ kind: 'refused', reason });
  });

  it('should name the token and its scopes for a right one, whatever the scheme case', () => {
    for (const header of [`Bearer ${B}`, `bearer ${B}`, `BEARER  ${B} `]) {
      const outcome = tokens.authenticate(header);
      expect(outcome.kind === 'token' && outcome.token.name).toBe('b');
      expect(outcome.kind === 'token' && [...outcome.token.scopes]).toEqual(['admin']);
    }
  });
});

describe('when tokens are read from the environment', () => {
  const config = parseConfig({
    http: {
      operator: {
        tokens: [
          { name: 'ops', tokenEnv: 'CALLGATE_TOKEN_OPS', scopes: ['operations:read'] },
          { name: 'admin', tokenEnv: 'CALLGATE_TOKEN_ADMIN', scopes: ['admin'] },
        ],
      },
    },
  });

  it('should refuse to start when a variable is unset, empty or too short, naming each', () => {
    let error: unknown;
    try {
      readOperatorTokens(config, { CALLGATE_TOKEN_OPS: 'short', CALLGATE_TOKEN_ADMIN: '' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'http.operator.tokens[0] (ops): CALLGATE_TOKEN_OPS is shorter than 16 characters',
      'http.operator.tokens[1] (admin): the environment variable CALLGATE_TOKEN_ADMIN is not set',
    ]);
  });

  it('should accept each token by its secret', () => {
    const read = readOperatorTokens(config, { CALLGATE_TOKEN_OPS: A, CALLGATE_TOKEN_ADMIN: B });
    expect(read.size).toBe(2);
    const outcome = read.authenticate(`Bearer ${A}`);
    expect(outcome.kind === 'token' && outcome.token.name).toBe('ops');
  });
});

describe('when the operator listener is configured', () => {
  const problemsOf = (operator: Record<string, unknown>): string[] => {
    try {
      parseConfig({ http: { operator } });
      return [];
    } catch (error) {
      return [...(error as ConfigError).problems];
    }
  };

  it('should refuse a non-loopback listener without tokens, and allow loopback without', () => {
    expect(problemsOf({ listen: '0.0.0.0' })).toEqual([
      'http.operator.tokens: required when http.operator.listen (0.0.0.0) is not a loopback address',
    ]);
    expect(problemsOf({ listen: '127.0.0.1' })).toEqual([]);
    expect(problemsOf({ listen: '::1' })).toEqual([]);
  });

  it('should refuse an unknown scope, a token named twice and the probe port reused', () => {
    const token = { name: 'ops', tokenEnv: 'CALLGATE_TOKEN_OPS', scopes: ['operations:read'] };
    expect(problemsOf({ tokens: [{ ...token, scopes: ['everything'] }] })[0]).toMatch(
      /^http\.operator\.tokens\[0\]\.scopes\[0\]:/,
    );
    expect(problemsOf({ tokens: [token, token] })).toEqual([
      'http.operator.tokens[1].name: token ops is named twice',
    ]);
    expect(problemsOf({ port: 8080 })).toEqual([
      'http.operator.port: port already used by http.port',
    ]);
  });
});
