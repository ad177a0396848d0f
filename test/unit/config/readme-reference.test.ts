import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  actionSchema,
  configSchema,
  providerSchema,
  retrySchema,
  tenantSchema,
} from '../../../config/schema.ts';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The keys of an object schema, looking through defaults, optionals and pipes. */
function keysOf(schema: z.ZodType): string[] {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, unknown>;
    anyOf?: { properties?: Record<string, unknown> }[];
    oneOf?: { properties?: Record<string, unknown> }[];
  };
  const variants = json.properties ? [json] : [...(json.anyOf ?? []), ...(json.oneOf ?? [])];
  return [...new Set(variants.flatMap((v) => Object.keys(v.properties ?? {})))];
}

describe('when the README configuration reference is compared with the schema', () => {
  it('should mention every setting of every section', () => {
    const json = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as {
      properties: Record<string, { properties?: Record<string, unknown> }>;
    };
    const missing: string[] = [];
    for (const [section, body] of Object.entries(json.properties)) {
      if (!readme.includes(`\`${section}`)) missing.push(section);
      for (const key of Object.keys(body.properties ?? {}))
        if (!readme.includes(`\`${key}\``)) missing.push(`${section}.${key}`);
    }
    const nested: [string, z.ZodType][] = [
      ['tenants[]', tenantSchema],
      ['actions', actionSchema],
      ['retry', retrySchema],
      ['providers', providerSchema],
    ];
    for (const [where, schema] of nested) {
      for (const key of keysOf(schema))
        if (!readme.includes(`\`${key}\``)) missing.push(`${where}.${key}`);
    }
    expect(missing).toEqual([]);
  });
});
