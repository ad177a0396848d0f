/**
 * A JSON Schema validator for the subset values.schema.json uses (type, properties, required,
 * additionalProperties, propertyNames, items, enum, minimum, maximum, minLength, minItems,
 * pattern). Any other keyword is reported, so the chart's schema cannot grow past what is checked.
 */

export type JsonSchema = Readonly<Record<string, unknown>>;

const ANNOTATIONS = new Set(['$schema', 'title', 'description', 'default', 'examples', '$comment']);
const KEYWORDS = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'propertyNames',
  'items',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'minItems',
  'pattern',
]);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Returns every problem as `path: message`; an empty list means valid. */
export function validate(schema: JsonSchema, value: unknown, path = '$'): string[] {
  const problems: string[] = [];
  for (const keyword of Object.keys(schema)) {
    if (!KEYWORDS.has(keyword) && !ANNOTATIONS.has(keyword))
      problems.push(`${path}: schema keyword ${keyword} is not supported by this validator`);
  }
  const type = schema.type;
  if (typeof type === 'string') {
    const actual = typeOf(value);
    const matches = actual === type || (type === 'number' && actual === 'integer');
    if (!matches) return [...problems, `${path}: must be ${type}, is ${actual}`];
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(value))
    problems.push(
      `${path}: must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`,
    );
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum)
      problems.push(`${path}: must be at least ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum)
      problems.push(`${path}: must be at most ${schema.maximum}`);
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength)
      problems.push(`${path}: must be at least ${schema.minLength} characters`);
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value))
      problems.push(`${path}: must match ${schema.pattern}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems)
      problems.push(`${path}: must have at least ${schema.minItems} items`);
    if (isSchema(schema.items)) {
      const items = schema.items;
      value.forEach((item, i) => problems.push(...validate(items, item, `${path}[${i}]`)));
    }
  }
  if (isSchema(value) && typeOf(value) === 'object') {
    const properties = isSchema(schema.properties) ? schema.properties : {};
    const names = schema.propertyNames;
    if (Array.isArray(schema.required)) {
      for (const key of schema.required as string[])
        if (!(key in value)) problems.push(`${path}.${key}: is required`);
    }
    for (const [key, child] of Object.entries(value)) {
      const own = properties[key];
      if (isSchema(names)) problems.push(...validate(names, key, `${path}.${key} (name)`));
      if (isSchema(own)) problems.push(...validate(own, child, `${path}.${key}`));
      else if (schema.additionalProperties === false) problems.push(`${path}.${key}: unknown key`);
      else if (isSchema(schema.additionalProperties))
        problems.push(...validate(schema.additionalProperties, child, `${path}.${key}`));
    }
  }
  return problems;
}

/** The schema node for a dotted path through `properties`, or undefined when the schema does not declare it. */
export function schemaAt(schema: JsonSchema, path: readonly string[]): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const key of path) {
    const properties: unknown = node?.properties;
    const next: unknown = isSchema(properties) ? properties[key] : undefined;
    node = isSchema(next) ? next : undefined;
    if (node === undefined) return undefined;
  }
  return node;
}
