/**
 * `npm run check -- --config FILE`: a configuration validated as callgate would load it (every
 * problem by path), without starting anything, and what the model will be shown: each agent's
 * tools as they go on the wire. Secrets are not read, only whether the variables they name are set
 * where the check runs (a warning: production sets them elsewhere).
 */
import { loadCallAgents } from '../../agents/agent-module.ts';
import { agentVersion } from '../../agents/agent-versions.ts';
import type { AgentCatalogue } from '../../agents/agent.ts';
import { ConfigError, loadConfig } from '../../config/load.ts';
import type { Config } from '../../config/schema.ts';
import { toolToWire } from '../realtime/session-config-wire.ts';
import { sipListenerIsLoopback } from '../sip/open-trunks.ts';

type FunctionToolWire = ReturnType<typeof toolToWire>;

export interface AgentView {
  readonly name: string;
  /** Tenants that answer with this agent first. */
  readonly entryOf: readonly string[];
  readonly tools: readonly FunctionToolWire[];
}

export type CheckReport =
  | { readonly valid: false; readonly source: string; readonly problems: readonly string[] }
  | {
      readonly valid: true;
      readonly source: string;
      readonly agentVersion: string;
      readonly warnings: readonly string[];
      readonly agents: readonly AgentView[];
    };

export async function checkConfig(
  path: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CheckReport> {
  let config: Config;
  let catalogue: AgentCatalogue;
  try {
    config = loadConfig({ path, env });
    // The module too, if the configuration names one: its agents are checked with the others.
    catalogue = (await loadCallAgents(config)).catalogue;
  } catch (error) {
    if (error instanceof ConfigError)
      return { valid: false, source: path, problems: error.problems };
    return {
      valid: false,
      source: path,
      problems: [error instanceof Error ? error.message : String(error)],
    };
  }
  const agents = catalogue.names().map((name) => ({
    name,
    entryOf: config.tenants.filter((t) => t.agent === name).map((t) => t.id),
    tools: (catalogue.get(name)?.tools ?? []).map((tool) => toolToWire(tool)),
  }));
  return {
    valid: true,
    source: path,
    agentVersion: agentVersion(config),
    warnings: [...unsetSecrets(config, env), ...unusedParts(config), ...openTrunks(config)],
    agents,
  };
}

/** Every `...Env` setting whose variable is not set in `env`, by path. */
function unsetSecrets(config: Config, env: NodeJS.ProcessEnv): string[] {
  const warnings: string[] = [];
  const walk = (value: unknown, path: string): void => {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, `${path}[${i}]`));
    else if (value !== null && typeof value === 'object')
      for (const [key, inner] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (key.endsWith('Env') && typeof inner === 'string' && (env[inner] ?? '') === '') {
          const note = unsetNote(config, at);
          if (note !== undefined)
            warnings.push(`${at}: names ${inner}, which is not set here${note}`);
        } else walk(inner, at);
      }
  };
  walk(config, '');
  return warnings;
}

/** What an unset secret means for this configuration; undefined when the setting is not in use. */
function unsetNote(config: Config, path: string): string | undefined {
  if (path.startsWith('sip.drachtio.')) return config.sip.driver === 'drachtio' ? '' : undefined;
  if (path === 'model.openai.apiKeyEnv') {
    if (config.model.provider === 'simulator') return undefined;
    return config.model.provider === 'auto' ? ' (the local simulator answers instead)' : '';
  }
  return '';
}

/** Tenants that take calls from anyone, said louder when SIP is reachable beyond this host. */
function openTrunks(config: Config): string[] {
  const where = sipListenerIsLoopback(config.sip)
    ? 'SIP listens on loopback only'
    : 'SIP is reachable beyond loopback, so any source that finds it is answered by an agent';
  return config.tenants.flatMap((tenant, i) =>
    tenant.trunk.open
      ? [`tenants[${i}].trunk.open: ${tenant.id} takes calls from anyone; ${where}`]
      : [],
  );
}

/** Providers no action uses, and agents no tenant reaches as its entry. */
function unusedParts(config: Config): string[] {
  const used = new Set(
    config.tenants.flatMap((t) => Object.values(t.actions).map((action) => action.provider)),
  );
  return Object.keys(config.providers)
    .filter((name) => !used.has(name))
    .map((name) => `providers.${name}: no tenant action uses it`);
}

export function formatCheckReport(report: CheckReport): string {
  if (!report.valid)
    return [
      `callgate check: ${report.source} is not valid`,
      ...report.problems.map((p) => `  - ${p}`),
      '',
    ].join('\n');
  const lines = [
    `callgate check: ${report.source} is valid (agents version ${report.agentVersion})`,
  ];
  if (report.warnings.length > 0)
    lines.push('warnings:', ...report.warnings.map((w) => `  - ${w}`));
  for (const agent of report.agents) {
    const entry = agent.entryOf.length > 0 ? ` (answers ${agent.entryOf.join(', ')})` : '';
    lines.push('', `agent ${agent.name}${entry}: the tools as the model sees them`);
    for (const tool of agent.tools)
      lines.push(
        JSON.stringify(tool, null, 2)
          .split('\n')
          .map((l) => `  ${l}`)
          .join('\n'),
      );
  }
  return `${lines.join('\n')}\n`;
}
