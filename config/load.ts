/**
 * Loading: the YAML file named by CALLGATE_CONFIG (the bundled example when unset), then
 * environment overrides, then the schema. Every problem is reported with its path; callers
 * decide how to stop (the entry points print the list and exit 2).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import type { z } from 'zod';
import { configSchema, type Config } from './schema.ts';
import { checkTlsFiles } from './tls-files.ts';

/** The documented example, which is also the embedded default configuration. */
export const EXAMPLE_CONFIG_PATH = fileURLToPath(
  new URL('./callgate.example.yaml', import.meta.url),
);

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: readonly string[]) {
    super(`invalid configuration (${source}):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadOptions {
  /** Environment to read CALLGATE_CONFIG and overrides from; defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** Read this file instead of CALLGATE_CONFIG. */
  path?: string;
  /** Use this document instead of reading a file (tests). */
  document?: unknown;
  /** Where an inline document's relative paths (instructionsFile, agents.module) start; the working directory by default. */
  baseDir?: string;
  /**
   * Check the PEM files sip.tls and tenants[].tls name (config/tls-files.ts); true by default. A
   * worker opens no TLS and skips it, so its pod needs neither the listener's key nor trunk CAs.
   */
  tlsFiles?: boolean;
}

/**
 * Named overrides for the settings people change most; anything else can be set with
 * `CALLGATE__<path>` where the path segments are separated by `__` (e.g. `CALLGATE__sip__udpPort=5070`).
 */
const NAMED_OVERRIDES: Readonly<Record<string, readonly string[]>> = {
  REDIS_URL: ['redis', 'url'],
  CALLGATE_LOG_LEVEL: ['log', 'level'],
  CALLGATE_HTTP_PORT: ['http', 'port'],
  CALLGATE_SIP_PORT: ['sip', 'udpPort'],
  CALLGATE_SIP_TCP_PORT: ['sip', 'tcpPort'],
  CALLGATE_GATEWAY_ID: ['gateway', 'id'],
};

export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const path = options.path ?? (env.CALLGATE_CONFIG || EXAMPLE_CONFIG_PATH);
  const source = options.document !== undefined ? 'inline document' : path;
  const document =
    options.document !== undefined ? structuredClone(options.document) : readDocument(path);
  const overrideProblems = applyEnvOverrides(document, env);
  const baseDir =
    options.document !== undefined ? (options.baseDir ?? process.cwd()) : dirname(resolve(path));
  const instructions = readInstructionFiles(document, baseDir);
  const result = configSchema.safeParse(document);
  const problems = [
    ...overrideProblems,
    ...(result.success ? [] : formatIssues(result.error.issues)),
    ...instructions.problems,
  ];
  if (problems.length > 0 || !result.success) throw new ConfigError(source, problems);
  const tlsProblems = options.tlsFiles === false ? [] : checkTlsFiles(result.data, baseDir);
  if (tlsProblems.length > 0) throw new ConfigError(source, tlsProblems);
  for (const [index, text] of instructions.texts) {
    const agent = result.data.agents?.list[index];
    if (agent !== undefined) agent.instructions = text;
  }
  // Imported later, by a gateway (agents/agent-module.ts): from wherever it starts, the same file.
  if (result.data.agents?.module !== undefined)
    result.data.agents.module = resolve(baseDir, result.data.agents.module);
  return result.data;
}

/**
 * Reads each agent's `instructionsFile` (relative to the configuration file), so a missing file is
 * listed with every other problem; the texts become the agents' instructions once the document
 * is valid.
 */
function readInstructionFiles(
  document: unknown,
  baseDir: string,
): { texts: Map<number, string>; problems: string[] } {
  const texts = new Map<number, string>();
  const problems: string[] = [];
  const list = (document as { agents?: { list?: unknown } } | undefined)?.agents?.list;
  if (!Array.isArray(list)) return { texts, problems };
  list.forEach((agent: unknown, i) => {
    const file = (agent as { instructionsFile?: unknown } | null)?.instructionsFile;
    if (typeof file !== 'string' || file === '') return;
    const at = `agents.list[${i}].instructionsFile`;
    try {
      const text = readFileSync(resolve(baseDir, file), 'utf8').trim();
      if (text === '') problems.push(`${at}: ${file} is empty`);
      else texts.set(i, text);
    } catch (error) {
      problems.push(
        `${at}: cannot read ${resolve(baseDir, file)}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      );
    }
  });
  return { texts, problems };
}

/** Validates a document without reading files or the environment. */
export function parseConfig(document: unknown): Config {
  return loadConfig({ document, env: {} });
}

function readDocument(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(path, [
      `cannot read the file: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    ]);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (error) {
    const where =
      error instanceof YAMLParseError && error.linePos ? ` at line ${error.linePos[0].line}` : '';
    const message = error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
    throw new ConfigError(path, [`not valid YAML${where}: ${message}`]);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ConfigError(path, ['the top level must be a mapping']);
  return parsed as Record<string, unknown>;
}

function applyEnvOverrides(document: unknown, env: NodeJS.ProcessEnv): string[] {
  const problems: string[] = [];
  if (typeof document !== 'object' || document === null) return problems;
  const root = document as Record<string, unknown>;
  for (const [name, path] of Object.entries(NAMED_OVERRIDES)) {
    const value = env[name];
    if (value !== undefined && value !== '') setPath(root, path, coerce(value));
  }
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('CALLGATE__') || value === undefined) continue;
    const path = name.slice('CALLGATE__'.length).split('__');
    if (path.some((segment) => segment === '')) {
      problems.push(`${name}: not a valid override name (use CALLGATE__section__key)`);
      continue;
    }
    const conflict = setPath(root, path, coerce(value));
    if (conflict) problems.push(`${name}: ${conflict}`);
  }
  return problems;
}

function setPath(
  root: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
): string | undefined {
  let node: Record<string, unknown> = root;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i] as string;
    const next: unknown = node[key];
    if (next === undefined) {
      node[key] = {};
      node = node[key] as Record<string, unknown>;
    } else if (typeof next === 'object' && next !== null) {
      node = next as Record<string, unknown>;
    } else {
      return `${path.slice(0, i + 1).join('.')} is not a section`;
    }
  }
  node[path[path.length - 1] as string] = value;
  return undefined;
}

/** Environment values are strings; numbers, booleans and JSON arrays/objects are recognised. */
function coerce(value: string): unknown {
  const trimmed = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  if (trimmed === 'true' || trimmed === 'false') return trimmed === 'true';
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    try {
      return JSON.parse(trimmed) as unknown;
    } catch {
      return value;
    }
  }
  return value;
}

/** `tenants[1].actions.refund.policy: coalesce is only allowed for read actions` */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) => {
    // An unknown key is reported at its own path, so the line names exactly what to delete.
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => `${formatPath([...issue.path, key])}: unknown key`);
    }
    const path = formatPath(issue.path);
    return [path === '' ? issue.message : `${path}: ${issue.message}`];
  });
}

/** `tenants[1].actions.refund`: a path as problems name it. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}
