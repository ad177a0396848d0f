/**
 * A PromQL parser just large enough to check what the chart ships: it accepts the language's
 * expressions (selectors, range and subquery brackets, offset and @, aggregations with by/without,
 * binary operators with bool/on/ignoring/group_left/group_right, functions), checks argument types
 * the way Prometheus does (rate() wants a range vector), and returns every selector it saw. It does
 * not evaluate anything.
 */

export type ValueType = 'scalar' | 'vector' | 'matrix' | 'string';

export interface LabelMatcher {
  readonly label: string;
  readonly op: '=' | '!=' | '=~' | '!~';
  readonly value: string;
}

export interface Selector {
  /** The metric name, from the name before `{` or from a `__name__="..."` matcher. */
  readonly metric: string | undefined;
  readonly matchers: readonly LabelMatcher[];
  readonly range: boolean;
  /** The innermost function the selector is an argument of (`rate` in `sum(rate(x[5m]))`). */
  readonly fn: string | undefined;
}

export interface ParsedQuery {
  readonly type: ValueType;
  readonly selectors: readonly Selector[];
}

export class PromqlSyntaxError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message} at offset ${position}`);
    this.name = 'PromqlSyntaxError';
  }
}

type TokenKind = 'number' | 'duration' | 'string' | 'identifier' | 'operator' | 'punct' | 'end';

interface Token {
  readonly kind: TokenKind;
  readonly text: string;
  readonly at: number;
  /** For strings: the unescaped value. */
  readonly value?: string;
}

const DURATION = /^(?:\d+(?:ms|s|m|h|d|w|y))+/;
const NUMBER = /^(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|[Nn]a[Nn])/;
/** Names may contain ':' (recording rules) but not start with it: a leading ':' is a subquery step. */
const IDENTIFIER = /^[a-zA-Z_][a-zA-Z0-9_:]*/;
const OPERATORS = ['==', '!=', '>=', '<=', '=~', '!~', '+', '-', '*', '/', '%', '^', '>', '<', '='];
const PUNCTUATION = ['(', ')', '{', '}', '[', ']', ',', '@'];

export function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const rest = source.slice(i);
    const ch = source[i] as string;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (ch === '#') {
      const end = source.indexOf('\n', i);
      i = end === -1 ? source.length : end;
      continue;
    }
    if (ch === '"' || ch === "'" || ch === '`') {
      let j = i + 1;
      let value = '';
      for (;;) {
        const c = source[j];
        if (c === undefined || (c === '\n' && ch !== '`'))
          throw new PromqlSyntaxError('unterminated string', i);
        if (c === ch) break;
        if (c === '\\' && ch !== '`') {
          const next = source[j + 1];
          if (next === undefined) throw new PromqlSyntaxError('unterminated string', i);
          value += next === 'n' ? '\n' : next === 't' ? '\t' : next;
          j += 2;
          continue;
        }
        value += c;
        j++;
      }
      tokens.push({ kind: 'string', text: source.slice(i, j + 1), at: i, value });
      i = j + 1;
      continue;
    }
    const duration = DURATION.exec(rest);
    if (duration && !/^[a-zA-Z0-9_.]/.test(rest.slice(duration[0].length))) {
      tokens.push({ kind: 'duration', text: duration[0], at: i });
      i += duration[0].length;
      continue;
    }
    const number = /^[0-9.]/.test(ch) ? NUMBER.exec(rest) : null;
    if (number) {
      if (/^[a-zA-Z_]/.test(rest.slice(number[0].length)))
        throw new PromqlSyntaxError(`bad number ${rest.slice(0, number[0].length + 1)}`, i);
      tokens.push({ kind: 'number', text: number[0], at: i });
      i += number[0].length;
      continue;
    }
    const identifier = IDENTIFIER.exec(rest);
    if (identifier) {
      const text = identifier[0];
      tokens.push({
        kind: /^(?:[Ii]nf|[Nn]a[Nn])$/.test(text) ? 'number' : 'identifier',
        text,
        at: i,
      });
      i += text.length;
      continue;
    }
    const operator = OPERATORS.find((op) => rest.startsWith(op));
    if (operator) {
      tokens.push({ kind: 'operator', text: operator, at: i });
      i += operator.length;
      continue;
    }
    if (PUNCTUATION.includes(ch) || ch === ':') {
      tokens.push({ kind: 'punct', text: ch, at: i });
      i++;
      continue;
    }
    throw new PromqlSyntaxError(`unexpected character ${JSON.stringify(ch)}`, i);
  }
  tokens.push({ kind: 'end', text: '', at: source.length });
  return tokens;
}

const AGGREGATIONS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
  'limitk',
  'limit_ratio',
]);
/** Aggregations whose first argument is a parameter. */
const PARAMETRIZED: Readonly<Record<string, ValueType>> = {
  count_values: 'string',
  bottomk: 'scalar',
  topk: 'scalar',
  quantile: 'scalar',
  limitk: 'scalar',
  limit_ratio: 'scalar',
};

interface FunctionSignature {
  readonly args: readonly ValueType[];
  /** How many trailing arguments may be left out. */
  readonly optional?: number;
  /** The last argument may repeat. */
  readonly variadic?: boolean;
  readonly returns: ValueType;
}

const v = 'vector' as const;
const m = 'matrix' as const;
const s = 'scalar' as const;
const str = 'string' as const;
const onVector = (optional = 0): FunctionSignature => ({ args: [v], optional, returns: v });
const overTime: FunctionSignature = { args: [m], returns: v };

const FUNCTIONS: Readonly<Record<string, FunctionSignature>> = {
  abs: onVector(),
  absent: onVector(),
  absent_over_time: overTime,
  ceil: onVector(),
  changes: overTime,
  clamp: { args: [v, s, s], returns: v },
  clamp_max: { args: [v, s], returns: v },
  clamp_min: { args: [v, s], returns: v },
  day_of_month: { args: [v], optional: 1, returns: v },
  day_of_week: { args: [v], optional: 1, returns: v },
  day_of_year: { args: [v], optional: 1, returns: v },
  days_in_month: { args: [v], optional: 1, returns: v },
  delta: overTime,
  deriv: overTime,
  exp: onVector(),
  floor: onVector(),
  histogram_quantile: { args: [s, v], returns: v },
  histogram_count: onVector(),
  histogram_sum: onVector(),
  histogram_fraction: { args: [s, s, v], returns: v },
  holt_winters: { args: [m, s, s], returns: v },
  hour: { args: [v], optional: 1, returns: v },
  idelta: overTime,
  increase: overTime,
  irate: overTime,
  label_join: { args: [v, str, str, str], variadic: true, returns: v },
  label_replace: { args: [v, str, str, str, str], returns: v },
  ln: onVector(),
  log2: onVector(),
  log10: onVector(),
  minute: { args: [v], optional: 1, returns: v },
  month: { args: [v], optional: 1, returns: v },
  predict_linear: { args: [m, s], returns: v },
  rate: overTime,
  resets: overTime,
  round: { args: [v, s], optional: 1, returns: v },
  scalar: { args: [v], returns: s },
  sgn: onVector(),
  sort: onVector(),
  sort_desc: onVector(),
  sqrt: onVector(),
  time: { args: [], returns: s },
  timestamp: onVector(),
  vector: { args: [s], returns: v },
  year: { args: [v], optional: 1, returns: v },
  avg_over_time: overTime,
  min_over_time: overTime,
  max_over_time: overTime,
  sum_over_time: overTime,
  count_over_time: overTime,
  quantile_over_time: { args: [s, m], returns: v },
  stddev_over_time: overTime,
  stdvar_over_time: overTime,
  last_over_time: overTime,
  present_over_time: overTime,
  acos: onVector(),
  acosh: onVector(),
  asin: onVector(),
  asinh: onVector(),
  atan: onVector(),
  atanh: onVector(),
  cos: onVector(),
  cosh: onVector(),
  sin: onVector(),
  sinh: onVector(),
  tan: onVector(),
  tanh: onVector(),
  deg: onVector(),
  rad: onVector(),
  pi: { args: [], returns: s },
};

/** Binary operators by precedence, loosest first; `^` binds right. */
const PRECEDENCE: readonly (readonly string[])[] = [
  ['or'],
  ['and', 'unless'],
  ['==', '!=', '<=', '<', '>=', '>'],
  ['+', '-'],
  ['*', '/', '%', 'atan2'],
  ['^'],
];
const SET_OPERATORS = new Set(['and', 'or', 'unless']);
const COMPARISONS = new Set(['==', '!=', '<=', '<', '>=', '>']);

class Parser {
  private index = 0;
  readonly selectors: Selector[] = [];
  /** Whether the primary just parsed was a selector, so `[5m]` can tell `x[5m]` from `(x)[5m]`. */
  private lastWasSelector = false;

  constructor(private readonly tokens: readonly Token[]) {}

  parseAll(): ValueType {
    const type = this.parseExpression(0);
    const next = this.peek();
    if (next.kind !== 'end')
      throw new PromqlSyntaxError(`unexpected ${JSON.stringify(next.text)}`, next.at);
    return type;
  }

  private peek(offset = 0): Token {
    return this.tokens[Math.min(this.index + offset, this.tokens.length - 1)] as Token;
  }

  private next(): Token {
    const token = this.peek();
    if (token.kind !== 'end') this.index++;
    return token;
  }

  private isPunct(text: string, offset = 0): boolean {
    const token = this.peek(offset);
    return token.kind === 'punct' && token.text === text;
  }

  private expectPunct(text: string): Token {
    const token = this.next();
    if (token.kind !== 'punct' || token.text !== text) {
      throw new PromqlSyntaxError(
        `expected ${JSON.stringify(text)}, found ${JSON.stringify(token.text || 'end of input')}`,
        token.at,
      );
    }
    return token;
  }

  private binaryOperatorAt(level: number): string | undefined {
    const token = this.peek();
    const ops = PRECEDENCE[level] ?? [];
    if (token.kind === 'operator' && ops.includes(token.text)) return token.text;
    if (token.kind === 'identifier' && ops.includes(token.text.toLowerCase()))
      return token.text.toLowerCase();
    return undefined;
  }

  private parseExpression(level: number): ValueType {
    if (level >= PRECEDENCE.length) return this.parseUnary();
    let left = this.parseExpression(level + 1);
    for (;;) {
      const op = this.binaryOperatorAt(level);
      if (op === undefined) return left;
      const at = this.next().at;
      const returnBool = this.parseBinaryModifiers(op);
      // `^` is right-associative; everything else binds left.
      const right = op === '^' ? this.parseExpression(level) : this.parseExpression(level + 1);
      left = this.binaryResult(op, left, right, returnBool, at);
    }
  }

  /** bool, on/ignoring (labels), group_left/group_right [(labels)]; returns whether `bool` was given. */
  private parseBinaryModifiers(op: string): boolean {
    let returnBool = false;
    if (this.peekKeyword('bool')) {
      if (!COMPARISONS.has(op))
        throw new PromqlSyntaxError('bool only applies to comparison operators', this.peek().at);
      this.next();
      returnBool = true;
    }
    if (this.peekKeyword('on') || this.peekKeyword('ignoring')) {
      this.next();
      this.parseLabelList();
      if (this.peekKeyword('group_left') || this.peekKeyword('group_right')) {
        if (SET_OPERATORS.has(op))
          throw new PromqlSyntaxError(`no grouping allowed for ${op}`, this.peek().at);
        this.next();
        if (this.isPunct('(')) this.parseLabelList();
      }
    } else if (this.peekKeyword('group_left') || this.peekKeyword('group_right')) {
      throw new PromqlSyntaxError('group_left/group_right need on() or ignoring()', this.peek().at);
    }
    return returnBool;
  }

  private binaryResult(
    op: string,
    left: ValueType,
    right: ValueType,
    returnBool: boolean,
    at: number,
  ): ValueType {
    for (const side of [left, right]) {
      if (side === 'string' || side === 'matrix')
        throw new PromqlSyntaxError(`binary ${op} on a ${side}`, at);
    }
    if (SET_OPERATORS.has(op)) {
      if (left !== 'vector' || right !== 'vector')
        throw new PromqlSyntaxError(`set operator ${op} needs instant vectors on both sides`, at);
      return 'vector';
    }
    if (COMPARISONS.has(op) && left === 'scalar' && right === 'scalar' && !returnBool) {
      throw new PromqlSyntaxError('comparisons between scalars must use bool', at);
    }
    return left === 'vector' || right === 'vector' ? 'vector' : 'scalar';
  }

  private peekKeyword(word: string): boolean {
    const token = this.peek();
    return token.kind === 'identifier' && token.text.toLowerCase() === word;
  }

  private parseUnary(): ValueType {
    const token = this.peek();
    if (token.kind === 'operator' && (token.text === '+' || token.text === '-')) {
      this.next();
      const type = this.parseUnary();
      if (type !== 'scalar' && type !== 'vector')
        throw new PromqlSyntaxError(`unary ${token.text} on a ${type}`, token.at);
      return type;
    }
    const before = this.selectors.length;
    const type = this.parsePrimary();
    // Only a bare selector (not `(x)` or `f(x)`) takes a range: exactly one selector was added and
    // the primary ended right after it.
    const bareSelector = this.selectors.length === before + 1 && this.lastWasSelector;
    return this.parsePostfix(type, bareSelector);
  }

  /** Range brackets, subqueries, offset and @ after a primary expression. */
  private parsePostfix(type: ValueType, bareSelector: boolean): ValueType {
    let current = type;
    let rangeable = bareSelector;
    for (;;) {
      if (this.isPunct('[')) {
        const open = this.next();
        this.expectDuration();
        if (this.isPunct(':')) {
          if (current !== 'vector')
            throw new PromqlSyntaxError(`subquery over a ${current}`, open.at);
          this.next();
          if (this.peek().kind === 'duration') this.next();
        } else {
          const last = this.selectors[this.selectors.length - 1];
          if (current !== 'vector' || last === undefined || !rangeable)
            throw new PromqlSyntaxError('a range needs a vector selector', open.at);
          this.selectors[this.selectors.length - 1] = { ...last, range: true };
        }
        this.expectPunct(']');
        current = 'matrix';
        rangeable = false;
        continue;
      }
      if (this.peekKeyword('offset')) {
        this.next();
        if (this.peek().kind === 'operator' && this.peek().text === '-') this.next();
        this.expectDuration();
        continue;
      }
      if (this.isPunct('@')) {
        this.next();
        const token = this.next();
        const isEdge =
          token.kind === 'identifier' && (token.text === 'start' || token.text === 'end');
        if (isEdge) {
          this.expectPunct('(');
          this.expectPunct(')');
        } else if (token.kind !== 'number') {
          throw new PromqlSyntaxError('@ needs a timestamp, start() or end()', token.at);
        }
        continue;
      }
      return current;
    }
  }

  private expectDuration(): void {
    const token = this.next();
    // A bare number of seconds is a duration too.
    if (token.kind !== 'duration' && token.kind !== 'number')
      throw new PromqlSyntaxError(
        `expected a duration, found ${JSON.stringify(token.text)}`,
        token.at,
      );
  }

  private parsePrimary(): ValueType {
    this.lastWasSelector = false;
    const token = this.peek();
    if (token.kind === 'number') {
      this.next();
      return 'scalar';
    }
    if (token.kind === 'duration') {
      throw new PromqlSyntaxError(`unexpected duration ${token.text}`, token.at);
    }
    if (token.kind === 'string') {
      this.next();
      return 'string';
    }
    if (token.kind === 'punct' && token.text === '(') {
      this.next();
      const type = this.parseExpression(0);
      this.expectPunct(')');
      this.lastWasSelector = false;
      return type;
    }
    if (token.kind === 'punct' && token.text === '{') {
      this.parseSelector(undefined);
      return 'vector';
    }
    if (token.kind === 'identifier') {
      const name = token.text;
      const lower = name.toLowerCase();
      if (
        AGGREGATIONS.has(lower) &&
        (this.isPunct('(', 1) || this.peekKeywordAt(1, 'by') || this.peekKeywordAt(1, 'without'))
      ) {
        const type = this.parseAggregation(lower);
        this.lastWasSelector = false;
        return type;
      }
      if (this.isPunct('(', 1)) {
        const type = this.parseCall(name);
        this.lastWasSelector = false;
        return type;
      }
      if (
        [
          'by',
          'without',
          'on',
          'ignoring',
          'group_left',
          'group_right',
          'bool',
          'offset',
          'and',
          'or',
          'unless',
          'atan2',
        ].includes(lower)
      ) {
        throw new PromqlSyntaxError(`unexpected keyword ${name}`, token.at);
      }
      this.next();
      this.parseSelector(name);
      return 'vector';
    }
    throw new PromqlSyntaxError(
      `unexpected ${JSON.stringify(token.text || 'end of input')}`,
      token.at,
    );
  }

  private peekKeywordAt(offset: number, word: string): boolean {
    const token = this.peek(offset);
    return token.kind === 'identifier' && token.text.toLowerCase() === word;
  }

  private parseAggregation(op: string): ValueType {
    const at = this.next().at;
    let grouped = false;
    if (this.peekKeyword('by') || this.peekKeyword('without')) {
      this.next();
      this.parseLabelList();
      grouped = true;
    }
    this.expectPunct('(');
    const parameter = PARAMETRIZED[op];
    if (parameter !== undefined) {
      const type = this.parseExpression(0);
      if (type !== parameter)
        throw new PromqlSyntaxError(`${op} needs a ${parameter} parameter, got a ${type}`, at);
      this.expectPunct(',');
    }
    const type = this.parseExpression(0);
    if (type !== 'vector')
      throw new PromqlSyntaxError(`${op} needs an instant vector, got a ${type}`, at);
    this.expectPunct(')');
    if (!grouped && (this.peekKeyword('by') || this.peekKeyword('without'))) {
      this.next();
      this.parseLabelList();
    }
    return 'vector';
  }

  private parseCall(name: string): ValueType {
    const at = this.next().at;
    const signature = FUNCTIONS[name];
    if (signature === undefined) throw new PromqlSyntaxError(`unknown function ${name}`, at);
    this.expectPunct('(');
    const first = this.selectors.length;
    const args: ValueType[] = [];
    if (!this.isPunct(')')) {
      for (;;) {
        args.push(this.parseExpression(0));
        if (!this.isPunct(',')) break;
        this.next();
      }
    }
    this.expectPunct(')');
    for (let i = first; i < this.selectors.length; i++) {
      const selector = this.selectors[i];
      if (selector !== undefined && selector.fn === undefined)
        this.selectors[i] = { ...selector, fn: name };
    }
    const min = signature.args.length - (signature.optional ?? 0);
    const max = signature.variadic ? Infinity : signature.args.length;
    if (args.length < min || args.length > max)
      throw new PromqlSyntaxError(
        `${name} takes ${min === max ? min : `${min} to ${max}`} arguments, got ${args.length}`,
        at,
      );
    args.forEach((type, i) => {
      const expected = signature.args[Math.min(i, signature.args.length - 1)];
      if (type !== expected)
        throw new PromqlSyntaxError(
          `argument ${i + 1} of ${name} must be a ${expected}, got a ${type}`,
          at,
        );
    });
    return signature.returns;
  }

  private parseLabelList(): string[] {
    this.expectPunct('(');
    const labels: string[] = [];
    while (!this.isPunct(')')) {
      const token = this.next();
      if (token.kind !== 'identifier' && token.kind !== 'string')
        throw new PromqlSyntaxError(
          `expected a label name, found ${JSON.stringify(token.text || 'end of input')}`,
          token.at,
        );
      labels.push(token.value ?? token.text);
      if (this.isPunct(',')) this.next();
      else if (!this.isPunct(')')) throw new PromqlSyntaxError('expected , or )', this.peek().at);
    }
    this.expectPunct(')');
    return labels;
  }

  private parseSelector(name: string | undefined): void {
    const at = this.peek().at;
    const matchers: LabelMatcher[] = [];
    if (this.isPunct('{')) {
      this.next();
      while (!this.isPunct('}')) {
        const label = this.next();
        if (label.kind !== 'identifier' && label.kind !== 'string')
          throw new PromqlSyntaxError(
            `expected a label name, found ${JSON.stringify(label.text || 'end of input')}`,
            label.at,
          );
        const op = this.next();
        if (op.kind !== 'operator' || !['=', '!=', '=~', '!~'].includes(op.text))
          throw new PromqlSyntaxError(
            `expected a label matcher operator, found ${JSON.stringify(op.text)}`,
            op.at,
          );
        const value = this.next();
        if (value.kind !== 'string')
          throw new PromqlSyntaxError(
            `expected a quoted label value, found ${JSON.stringify(value.text)}`,
            value.at,
          );
        if (op.text === '=~' || op.text === '!~') {
          try {
            new RegExp(`^(?:${value.value ?? ''})$`);
          } catch {
            throw new PromqlSyntaxError(`bad regular expression ${value.text}`, value.at);
          }
        }
        matchers.push({
          label: label.value ?? label.text,
          op: op.text as LabelMatcher['op'],
          value: value.value ?? '',
        });
        if (this.isPunct(',')) this.next();
        else if (!this.isPunct('}')) throw new PromqlSyntaxError('expected , or }', this.peek().at);
      }
      this.expectPunct('}');
    }
    const nameMatcher = matchers.find(
      (matcher) => matcher.label === '__name__' && matcher.op === '=',
    );
    const metric = name ?? nameMatcher?.value;
    if (
      metric === undefined &&
      !matchers.some(
        (matcher) =>
          !/^(?:\.\*)?$/.test(matcher.value) && matcher.op !== '!=' && matcher.op !== '!~',
      )
    ) {
      throw new PromqlSyntaxError(
        'a selector needs a metric name or a matcher that does not match the empty string',
        at,
      );
    }
    this.selectors.push({ metric, matchers, range: false, fn: undefined });
    this.lastWasSelector = true;
  }
}

/** Parses one expression; throws PromqlSyntaxError with an offset on any mistake. */
export function parsePromql(source: string): ParsedQuery {
  const parser = new Parser(tokenize(source));
  const type = parser.parseAll();
  return { type, selectors: parser.selectors };
}

/**
 * Grafana expressions carry template variables: `$__rate_interval` and friends become a duration,
 * any other `$name` / `${name}` outside a quoted string becomes 1 (they stand for numbers there;
 * inside label values they are left as they are).
 */
export function substituteGrafanaVariables(expr: string): string {
  let out = '';
  let quote: string | undefined;
  for (let i = 0; i < expr.length; i++) {
    const ch = expr[i] as string;
    if (quote !== undefined) {
      out += ch;
      if (ch === '\\') {
        out += expr[i + 1] ?? '';
        i++;
      } else if (ch === quote) {
        quote = undefined;
      }
      continue;
    }
    if (ch === '"' || ch === "'" || ch === '`') {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch === '$') {
      const match = /^\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|([a-zA-Z_][a-zA-Z0-9_]*))/.exec(
        expr.slice(i),
      );
      if (match) {
        const name = match[1] ?? match[2] ?? '';
        out += name.startsWith('__') ? '5m' : '1';
        i += match[0].length - 1;
        continue;
      }
    }
    out += ch;
  }
  return out;
}
