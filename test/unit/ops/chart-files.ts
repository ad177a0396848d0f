/** The chart's files as the tests read them: values, schema, templates, alerts and dashboards. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import type { JsonSchema } from './json-schema-subset.ts';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const CHART = join(ROOT, 'helm/callgate');
export const ALERTS_FILE = join(CHART, 'files/alerts.yaml');
export const RUNBOOK_FILE = join(ROOT, 'docs/runbook.md');

export function readValues(): Record<string, unknown> {
  return parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8'), {
    uniqueKeys: true,
  }) as Record<string, unknown>;
}

export function readSchema(): JsonSchema {
  return JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as JsonSchema;
}

export interface TemplateFile {
  readonly name: string;
  readonly text: string;
}

export function readTemplates(): TemplateFile[] {
  const dir = join(CHART, 'templates');
  return readdirSync(dir)
    .filter((name) => name.endsWith('.yaml') || name.endsWith('.tpl'))
    .sort()
    .map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
}

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

export function readAlerts(): AlertRule[] {
  const doc = parseYaml(readFileSync(ALERTS_FILE, 'utf8')) as {
    groups: { name: string; rules: AlertRule[] }[];
  };
  return doc.groups.flatMap((group) => group.rules);
}

export interface DashboardFile {
  readonly name: string;
  readonly text: string;
}

export function readDashboards(): DashboardFile[] {
  const dir = join(CHART, 'dashboards');
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
}

/** Anchors of docs/runbook.md headings, as GitHub renders them. */
export function runbookAnchors(): Set<string> {
  const text = readFileSync(RUNBOOK_FILE, 'utf8');
  const anchors = new Set<string>();
  for (const match of text.matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    const heading = (match[1] ?? '').replace(/`/g, '');
    anchors.add(
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return anchors;
}
