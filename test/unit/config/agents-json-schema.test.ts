import { describe, expect, it } from 'vitest';
import { argumentsSchema, toolSchemaIssues } from '../../../config/agents-json-schema.ts';

const BOOKING = {
  type: 'object',
  properties: {
    restaurant: { type: 'string', enum: ['trattoria-roma', 'sushi-kaito'] },
    date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' },
    party_size: { type: 'integer', minimum: 1, maximum: 20 },
    name: { type: 'string', minLength: 1, maxLength: 80 },
    note: { type: ['string', 'null'], description: 'anything else', default: null },
    tags: { type: 'array', items: { type: 'string', format: 'email' }, maxItems: 3 },
    when: { anyOf: [{ type: 'string', format: 'date' }, { type: 'null' }] },
  },
  required: ['restaurant', 'date', 'party_size'],
};

/** Each problem as `path: message`, as the loader lists them. */
function problems(schema: unknown): string[] {
  return toolSchemaIssues(schema).map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}

describe('when tool parameters are checked against what function calling takes', () => {
  it('should accept an object of the supported keywords, nullable types and anyOf included', () => {
    expect(problems(BOOKING)).toEqual([]);
    expect(problems({ ...BOOKING, additionalProperties: false })).toEqual([]);
  });

  it.each([
    ['$ref', { $ref: '#/$defs/date' }, 'inline the referenced schema'],
    ['if', { if: { type: 'string' } }, 'conditional schemas are not supported'],
    ['then', { then: { type: 'string' } }, 'conditional schemas are not supported'],
    ['else', { else: { type: 'string' } }, 'conditional schemas are not supported'],
    ['patternProperties', { patternProperties: { '^x': {} } }, 'name every argument'],
    ['dependentSchemas', { dependentSchemas: {} }, 'not supported'],
    ['oneOf', { oneOf: [{ type: 'string' }] }, 'use anyOf'],
    ['allOf', { allOf: [{ type: 'string' }] }, 'merge the schemas'],
    ['not', { not: { type: 'string' } }, 'negated'],
    ['$defs', { $defs: {} }, 'inline the definitions'],
    ['x-custom', { 'x-custom': 1 }, 'not supported by function calling'],
  ])('should refuse %s by name, at its path', (keyword, extra, hint) => {
    const schema = {
      type: 'object',
      properties: { date: { type: 'string', ...extra } },
    };
    const found = problems(schema);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(`properties.date.${keyword}: ${keyword} is not supported`);
    expect(found[0]).toContain(hint);
  });

  it('should refuse an unsupported keyword deep inside items and anyOf, with the whole path', () => {
    const schema = {
      type: 'object',
      properties: {
        stops: { type: 'array', items: { anyOf: [{ type: 'string', if: {} }, { type: 'null' }] } },
      },
    };
    expect(problems(schema)).toEqual([
      'properties.stops.items.anyOf.0.if: if is not supported by function calling: conditional schemas are not supported; use anyOf',
    ]);
  });

  it('should refuse a root that is not an object of named arguments', () => {
    expect(problems({ type: 'string' })).toEqual([
      'type: must be object at the root (the arguments)',
      'properties: the root must list its arguments in properties',
    ]);
    expect(problems([])).toEqual([': must be a JSON Schema (a mapping)']);
  });

  it('should refuse malformed values of supported keywords', () => {
    expect(
      problems({
        type: 'object',
        properties: {
          a: { type: 'text' },
          b: { type: ['string', 'integer'] },
          c: { type: 'string', pattern: '(' },
          d: { type: 'string', format: 'phone' },
          e: { enum: [] },
          f: { type: 'string', minLength: -1 },
        },
        required: ['a', 'missing'],
      }),
    ).toEqual([
      'properties.a.type: unknown type text (known: string, number, integer, boolean, object, array, null)',
      'properties.b.type: a list of types may only add null to one type (a nullable type)',
      expect.stringContaining('properties.c.pattern: is not a valid regular expression'),
      expect.stringContaining('properties.d.format: unsupported format phone'),
      'properties.e.enum: must be a non-empty list',
      'properties.f.minLength: must be a whole number, 0 or more',
      'required.1: missing is not in properties',
    ]);
  });
});

describe('when arguments are validated with the schema made from the JSON Schema', () => {
  const strict = argumentsSchema({ ...BOOKING, additionalProperties: false });
  const lenient = argumentsSchema(BOOKING);
  const valid = { restaurant: 'sushi-kaito', date: '2031-05-01', party_size: 4 };

  it('should accept valid arguments and apply defaults', () => {
    expect(strict.parse(valid)).toEqual({ ...valid, note: null });
  });

  it.each([
    ['an enum', { ...valid, restaurant: 'burger-bar' }, 'restaurant'],
    ['a pattern', { ...valid, date: '1 May' }, 'date'],
    ['a minimum', { ...valid, party_size: 0 }, 'party_size'],
    ['a maximum', { ...valid, party_size: 21 }, 'party_size'],
    ['an integer type', { ...valid, party_size: 2.5 }, 'party_size'],
    ['a maxLength', { ...valid, name: 'x'.repeat(81) }, 'name'],
    ['a required field', { restaurant: 'sushi-kaito', date: '2031-05-01' }, 'party_size'],
    ['a format', { ...valid, tags: ['not-an-address'] }, 'tags'],
  ])('should enforce %s', (_what, args, field) => {
    const parsed = strict.safeParse(args);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((issue) => issue.path[0])).toContain(field);
  });

  it('should refuse an argument it does not name with additionalProperties: false', () => {
    const parsed = strict.safeParse({ ...valid, vip: true });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.code).toBe('unrecognized_keys');
  });

  it('should drop an argument it does not name without additionalProperties (as zod objects do)', () => {
    expect(lenient.parse({ ...valid, vip: true })).not.toHaveProperty('vip');
  });
});
