import { describe, expect, it } from 'vitest';
import { readSchema, readTemplates, readValues } from './chart-files.ts';
import { schemaAt, validate } from './json-schema-subset.ts';

/**
 * `.Values.a.b` paths a template reads, including through a variable bound to a values path
 * (`{{- $g := .Values.gateway -}}` then `$g.pdb.enabled`).
 */
function valuesPaths(text: string): string[][] {
  const paths: string[][] = [];
  const aliases = new Map<string, string[]>();
  for (const match of text.matchAll(
    /(\$[a-zA-Z_][a-zA-Z0-9_]*)\s*:=\s*\$?\.Values((?:\.[a-zA-Z_][a-zA-Z0-9_]*)+)\s*-?\}\}/g,
  )) {
    aliases.set(match[1] ?? '', (match[2] ?? '').slice(1).split('.'));
  }
  for (const match of text.matchAll(/\$?\.Values((?:\.[a-zA-Z_][a-zA-Z0-9_]*)+)/g))
    paths.push((match[1] ?? '').slice(1).split('.'));
  for (const [alias, prefix] of aliases) {
    const escaped = alias.replace('$', '\\$');
    for (const match of text.matchAll(
      new RegExp(`${escaped}((?:\\.[a-zA-Z_][a-zA-Z0-9_]*)+)`, 'g'),
    )) {
      paths.push([...prefix, ...(match[1] ?? '').slice(1).split('.')]);
    }
  }
  return paths;
}

function valueAt(values: unknown, path: readonly string[]): { found: boolean } {
  let node: unknown = values;
  for (const key of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !(key in node))
      return { found: false };
    node = (node as Record<string, unknown>)[key];
  }
  return { found: true };
}

describe('when the chart templates read values', () => {
  it('should find every values path they use in values.yaml and in values.schema.json', () => {
    const values = readValues();
    const schema = readSchema();
    const missing: string[] = [];
    let seen = 0;
    for (const template of readTemplates()) {
      for (const path of valuesPaths(template.text)) {
        seen++;
        const name = `${template.name}: .Values.${path.join('.')}`;
        if (!valueAt(values, path).found) missing.push(`${name} is not in values.yaml`);
        if (!schemaAt(schema, path)) missing.push(`${name} is not in values.schema.json`);
      }
    }
    expect(seen).toBeGreaterThan(50);
    expect(missing).toEqual([]);
  });

  it('should follow a variable bound to a values path', () => {
    const paths = valuesPaths(
      '{{- $w := .Values.worker -}}\n{{ $w.hpa.enabled }} {{ .Values.image.tag }}',
    );
    expect(paths).toContainEqual(['worker', 'hpa', 'enabled']);
    expect(paths).toContainEqual(['image', 'tag']);
  });
});

describe('when values.yaml is validated by values.schema.json', () => {
  it('should accept the default values', () => {
    expect(validate(readSchema(), readValues())).toEqual([]);
  });

  it('should declare every key of values.yaml in the schema', () => {
    const schema = readSchema();
    const undeclared: string[] = [];
    const walk = (node: unknown, path: string[]) => {
      if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
      // config is validated by config/schema.ts and redis by its own chart: the schema names only what the chart reads.
      if (path[0] === 'config' || path[0] === 'redis') return;
      for (const [key, child] of Object.entries(node)) {
        const at = [...path, key];
        const declared = schemaAt(schema, at);
        const parent = schemaAt(schema, path) ?? schema;
        const open = parent.additionalProperties !== false;
        if (!declared && !open) undeclared.push(at.join('.'));
        if (declared?.type === 'object' && declared.properties !== undefined) walk(child, at);
      }
    };
    walk(readValues(), []);
    expect(undeclared).toEqual([]);
  });

  it.each([
    [
      'an unknown network mode',
      ['gateway', 'networkMode'],
      'bridge',
      '$.gateway.networkMode: must be one of "hostNetwork", "service"',
    ],
    ['an unknown top-level key', ['workers'], {}, '$.workers: unknown key'],
    [
      'a Redis URL that is not redis://',
      ['externalRedis', 'url'],
      'http://redis:6379',
      '$.externalRedis.url: must match ^$|^rediss?://',
    ],
    [
      'a CPU target above 100%',
      ['worker', 'hpa', 'targetCPUUtilizationPercentage'],
      150,
      '$.worker.hpa.targetCPUUtilizationPercentage: must be at most 100',
    ],
    [
      'a secret name that is not a variable name',
      ['secrets', 'extraEnv'],
      { 'webhook-secret': 'x' },
      '$.secrets.extraEnv.webhook-secret (name): must match ^[A-Z_][A-Z0-9_]*$',
    ],
    [
      'a string where a port goes',
      ['config', 'http', 'port'],
      '8080',
      '$.config.http.port: must be integer, is string',
    ],
  ])('should refuse %s', (_case, path, value, problem) => {
    const values = readValues();
    let node: Record<string, unknown> = values;
    for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
    node[path[path.length - 1] as string] = value;
    expect(validate(readSchema(), values)).toContain(problem);
  });
});
