/**
 * Tool parameters as JSON Schema: the subset OpenAI function calling accepts, checked at load, and
 * the zod schema the tool runtime validates arguments with, made from the same document. Pure: no
 * I/O (test/unit/config/agents-json-schema.test.ts).
 */
import { z } from 'zod';

export type JsonSchema = Readonly<Record<string, unknown>>;

export interface SchemaIssue {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

const TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'] as const;

/** The string formats function calling documents; others are refused rather than ignored. */
const FORMATS = new Set([
  'date-time',
  'time',
  'date',
  'duration',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'uuid',
]);

type KeywordCheck = (value: unknown, path: readonly (string | number)[]) => SchemaIssue[];

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const issue = (path: readonly (string | number)[], message: string): SchemaIssue[] => [
  { path, message },
];

const aString: KeywordCheck = (value, path) =>
  typeof value === 'string' ? [] : issue(path, 'must be a string');

const aNumber: KeywordCheck = (value, path) =>
  typeof value === 'number' && Number.isFinite(value) ? [] : issue(path, 'must be a number');

const aCount: KeywordCheck = (value, path) =>
  Number.isInteger(value) && (value as number) >= 0
    ? []
    : issue(path, 'must be a whole number, 0 or more');

const aType: KeywordCheck = (value, path) => {
  const names = Array.isArray(value) ? value : [value];
  if (names.length === 0) return issue(path, 'must name a type');
  const unknown = names.filter((name) => !(TYPES as readonly unknown[]).includes(name));
  if (unknown.length > 0)
    return issue(
      path,
      `unknown type ${unknown.map(String).join(', ')} (known: ${TYPES.join(', ')})`,
    );
  const nonNull = names.filter((name) => name !== 'null');
  if (Array.isArray(value) && nonNull.length > 1)
    return issue(path, 'a list of types may only add null to one type (a nullable type)');
  return [];
};

const anEnum: KeywordCheck = (value, path) => {
  if (!Array.isArray(value) || value.length === 0) return issue(path, 'must be a non-empty list');
  const primitive = value.every(
    (v) => v === null || ['string', 'number', 'boolean'].includes(typeof v),
  );
  return primitive ? [] : issue(path, 'may only list strings, numbers, booleans or null');
};

const aPattern: KeywordCheck = (value, path) => {
  if (typeof value !== 'string') return issue(path, 'must be a string');
  try {
    new RegExp(value);
    return [];
  } catch (error) {
    return issue(path, `is not a valid regular expression: ${(error as Error).message}`);
  }
};

const aFormat: KeywordCheck = (value, path) =>
  typeof value === 'string' && FORMATS.has(value)
    ? []
    : issue(path, `unsupported format ${String(value)} (supported: ${[...FORMATS].join(', ')})`);

const aSchema: KeywordCheck = (value, path) => schemaIssues(value, path);

const schemaList: KeywordCheck = (value, path) =>
  Array.isArray(value) && value.length > 0
    ? value.flatMap((entry, i) => schemaIssues(entry, [...path, i]))
    : issue(path, 'must be a non-empty list of schemas');

const propertyMap: KeywordCheck = (value, path) =>
  isPlainObject(value)
    ? Object.entries(value).flatMap(([name, entry]) => schemaIssues(entry, [...path, name]))
    : issue(path, 'must map argument names to schemas');

const booleanOrSchema: KeywordCheck = (value, path) =>
  typeof value === 'boolean' ? [] : schemaIssues(value, path);

const anything: KeywordCheck = () => [];

const KEYWORDS: Readonly<Record<string, KeywordCheck>> = {
  type: aType,
  description: aString,
  title: aString,
  properties: propertyMap,
  required: anything, // checked with properties, below
  additionalProperties: booleanOrSchema,
  enum: anEnum,
  const: anything,
  default: anything,
  items: aSchema,
  anyOf: schemaList,
  minimum: aNumber,
  maximum: aNumber,
  exclusiveMinimum: aNumber,
  exclusiveMaximum: aNumber,
  multipleOf: aNumber,
  minLength: aCount,
  maxLength: aCount,
  minItems: aCount,
  maxItems: aCount,
  pattern: aPattern,
  format: aFormat,
};

/** Why a keyword function calling does not take is refused, where a hint helps. */
const REFUSED_HINTS: Readonly<Record<string, string>> = {
  $ref: 'inline the referenced schema',
  $defs: 'inline the definitions where they are used',
  definitions: 'inline the definitions where they are used',
  if: 'conditional schemas are not supported; use anyOf',
  then: 'conditional schemas are not supported; use anyOf',
  else: 'conditional schemas are not supported; use anyOf',
  oneOf: 'use anyOf',
  allOf: 'merge the schemas into one',
  not: 'negated schemas are not supported',
  patternProperties: 'name every argument in properties',
  dependentSchemas: 'not supported',
  dependentRequired: 'not supported',
};

function schemaIssues(node: unknown, path: readonly (string | number)[]): SchemaIssue[] {
  if (!isPlainObject(node)) return issue(path, 'must be a JSON Schema (a mapping)');
  const issues: SchemaIssue[] = [];
  for (const [keyword, value] of Object.entries(node)) {
    const check = KEYWORDS[keyword];
    if (check === undefined) {
      const hint = REFUSED_HINTS[keyword];
      issues.push({
        path: [...path, keyword],
        message: `${keyword} is not supported by function calling${hint === undefined ? '' : `: ${hint}`}`,
      });
      continue;
    }
    issues.push(...check(value, [...path, keyword]));
  }
  issues.push(...requiredIssues(node, path));
  return issues;
}

function requiredIssues(
  node: Record<string, unknown>,
  path: readonly (string | number)[],
): SchemaIssue[] {
  const required = node.required;
  if (required === undefined) return [];
  const at = [...path, 'required'];
  if (!Array.isArray(required) || !required.every((name) => typeof name === 'string'))
    return issue(at, 'must be a list of argument names');
  const properties = isPlainObject(node.properties) ? node.properties : {};
  return required.flatMap((name, i) =>
    name in properties ? [] : issue([...at, i], `${String(name)} is not in properties`),
  );
}

/**
 * Problems of a tool's parameters, each with its path inside them; none when function calling
 * takes the schema: an object at the root, with `properties`, and only supported keywords below.
 */
export function toolSchemaIssues(schema: unknown): SchemaIssue[] {
  if (!isPlainObject(schema)) return issue([], 'must be a JSON Schema (a mapping)');
  const issues: SchemaIssue[] = [];
  if (schema.type !== 'object')
    issues.push({ path: ['type'], message: 'must be object at the root (the arguments)' });
  if (!isPlainObject(schema.properties))
    issues.push({
      path: ['properties'],
      message: 'the root must list its arguments in properties',
    });
  if (schema.anyOf !== undefined)
    issues.push({
      path: ['anyOf'],
      message: 'is not allowed at the root (one object of arguments)',
    });
  issues.push(...schemaIssues(schema, []));
  if (issues.length > 0) return issues;
  try {
    argumentsSchema(schema);
  } catch (error) {
    issues.push({ path: [], message: `cannot be used to validate arguments: ${String(error)}` });
  }
  return issues;
}

/** The argument names a valid tool schema declares. */
export function schemaFields(schema: JsonSchema): Readonly<Record<string, JsonSchema>> {
  const properties = schema.properties;
  return isPlainObject(properties) ? (properties as Record<string, JsonSchema>) : {};
}

/** Whether an argument's schema is a number (integer or not), possibly nullable. */
export function isNumberField(field: JsonSchema): boolean {
  const types = Array.isArray(field.type) ? field.type : [field.type];
  return types.some((type) => type === 'number' || type === 'integer');
}

/**
 * The zod schema that validates arguments against a tool schema `toolSchemaIssues` accepts.
 * Without `additionalProperties`, an argument the schema does not name is dropped (it reaches
 * neither the provider nor the idempotency key); `additionalProperties: false` refuses it.
 */
export function argumentsSchema(schema: JsonSchema): z.ZodObject {
  const converted = z.fromJSONSchema(schema);
  if (!(converted instanceof z.ZodObject)) throw new Error('the root is not an object');
  return schema.additionalProperties === undefined ? converted.strip() : converted;
}
