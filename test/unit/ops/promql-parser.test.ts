import { describe, expect, it } from 'vitest';
import { readAlerts } from './chart-files.ts';
import { parsePromql, PromqlSyntaxError, substituteGrafanaVariables } from './promql.ts';

describe('when a valid PromQL expression is parsed', () => {
  it.each([
    ['a bare metric', 'callgate_sip_active_dialogs', 'vector', ['callgate_sip_active_dialogs']],
    [
      'a rate over a range',
      'rate(callgate_rtp_packets_total{direction="in"}[5m])',
      'vector',
      ['callgate_rtp_packets_total'],
    ],
    ['an aggregation with by before', 'sum by (action) (rate(a_total[5m]))', 'vector', ['a_total']],
    ['an aggregation with by after', 'sum(rate(a_total[5m])) by (action)', 'vector', ['a_total']],
    [
      'a ratio with ignoring and group_left',
      'sum by (a, b) (x) / ignoring (b) group_left sum by (a) (y)',
      'vector',
      ['x', 'y'],
    ],
    ['a set operator', '(x > 0) unless (y > 0)', 'vector', ['x', 'y']],
    [
      'a histogram quantile',
      'histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))',
      'vector',
      ['h_bucket'],
    ],
    ['a subquery', 'max_over_time(rate(x[1m])[10m:1m])', 'vector', ['x']],
    ['offset and @', 'x offset 5m @ 1700000000', 'vector', ['x']],
    ['a selector by __name__', '{__name__="x", job="a"}', 'vector', ['x']],
    ['a scalar comparison with bool', '1 > bool 0', 'scalar', []],
    ['topk with a parameter', 'topk(3, x)', 'vector', ['x']],
    ['right-associative power', '2 ^ 3 ^ 2', 'scalar', []],
    ['a unary minus and scalar()', '-x + scalar(y)', 'vector', ['x', 'y']],
    ['a trailing comma in matchers', 'x{a="1",}', 'vector', ['x']],
    ['a comment', 'x # the total\n+ y', 'vector', ['x', 'y']],
  ])('should accept %s', (_case, expr, type, metrics) => {
    const parsed = parsePromql(expr);
    expect(parsed.type).toBe(type);
    expect(parsed.selectors.map((s) => s.metric)).toEqual(metrics);
  });

  it('should mark range selectors and the innermost function around each selector', () => {
    const parsed = parsePromql('sum(rate(a_total[5m])) / sum(b)');
    expect(parsed.selectors).toEqual([
      { metric: 'a_total', matchers: [], range: true, fn: 'rate' },
      { metric: 'b', matchers: [], range: false, fn: undefined },
    ]);
  });

  it('should keep label matchers with their operators and unescaped values', () => {
    const parsed = parsePromql('x{code=~"5..", job!="a\\"b"}');
    expect(parsed.selectors[0]?.matchers).toEqual([
      { label: 'code', op: '=~', value: '5..' },
      { label: 'job', op: '!=', value: 'a"b' },
    ]);
  });
});

describe('when an invalid PromQL expression is parsed', () => {
  it.each([
    ['rate over an instant vector', 'rate(x)', /argument 1 of rate must be a matrix/],
    ['an unclosed call', 'sum(rate(x[5m])', /expected "\)"/],
    ['a range over a parenthesised expression', '(x)[5m]', /a range needs a vector selector/],
    ['a range over a function', 'abs(x)[5m]', /a range needs a vector selector/],
    ['an unclosed matcher list', 'x{a="b"', /expected , or \}/],
    ['two selectors side by side', 'x y', /unexpected "y"/],
    ['a missing right operand', 'x >', /unexpected "end of input"/],
    ['grouping on a set operator', 'x and on(a) group_left y', /no grouping allowed for and/],
    ['group_left without on()', 'x / group_left y', /need on\(\) or ignoring\(\)/],
    ['a bad regular expression', 'x{a=~"("}', /bad regular expression/],
    ['a scalar comparison without bool', '1 > 2', /must use bool/],
    ['an unknown function', 'nope(x)', /unknown function nope/],
    ['a wrong argument count', 'histogram_quantile(x)', /takes 2 arguments, got 1/],
    ['an unterminated string', 'x{a="b}', /unterminated string/],
    ['an unquoted label value', 'x{a=b}', /expected a quoted label value/],
    ['a selector matching everything', '{a=~".*"}', /needs a metric name/],
    ['a stray character', 'x ? y', /unexpected character/],
    ['an aggregation over a range', 'sum(x[5m])', /sum needs an instant vector, got a matrix/],
    ['a set operator on scalars', '1 and 2', /needs instant vectors on both sides/],
  ])('should refuse %s', (_case, expr, message) => {
    expect(() => parsePromql(expr)).toThrow(PromqlSyntaxError);
    expect(() => parsePromql(expr)).toThrow(message);
  });

  it('should refuse every shipped alert expression with any single bracket removed', () => {
    let cases = 0;
    const accepted: string[] = [];
    for (const rule of readAlerts()) {
      for (let i = 0; i < rule.expr.length; i++) {
        if (!'()[]{}'.includes(rule.expr[i] as string)) continue;
        const broken = rule.expr.slice(0, i) + rule.expr.slice(i + 1);
        cases++;
        try {
          parsePromql(broken);
          accepted.push(`${rule.alert} without offset ${i}: ${broken}`);
        } catch (error) {
          if (!(error instanceof PromqlSyntaxError)) throw error;
        }
      }
    }
    expect(cases).toBeGreaterThan(100);
    expect(accepted).toEqual([]);
  });

  it('should refuse every shipped alert expression cut short', () => {
    const accepted: string[] = [];
    for (const rule of readAlerts()) {
      const expr = rule.expr.trim();
      for (let end = 1; end < expr.length; end++) {
        const prefix = expr.slice(0, end);
        // A prefix that ends on a complete sub-expression may be valid on its own (`x > 0.0` of `x > 0.02`).
        const opens = [...prefix].filter((c) => '([{'.includes(c)).length;
        const closes = [...prefix].filter((c) => ')]}'.includes(c)).length;
        if (opens === closes) continue;
        try {
          parsePromql(prefix);
          accepted.push(`${rule.alert}: ${prefix}`);
        } catch (error) {
          if (!(error instanceof PromqlSyntaxError)) throw error;
        }
      }
    }
    expect(accepted).toEqual([]);
  });
});

describe('when Grafana variables are substituted', () => {
  it('should turn interval variables into a duration and other variables into a number, leaving quoted ones', () => {
    expect(
      substituteGrafanaVariables(
        'rate(x{ns=~"$namespace"}[$__rate_interval]) * $concurrency / ${n}',
      ),
    ).toBe('rate(x{ns=~"$namespace"}[5m]) * 1 / 1');
  });
});
