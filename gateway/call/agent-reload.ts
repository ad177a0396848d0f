/**
 * Reloading the agents without dropping calls (SIGHUP, POST /v1/admin/reload). The configuration
 * file is read and validated again; its agents, checked against the tenants the gateway runs with,
 * become the release new calls get. Calls in progress keep theirs. An invalid configuration is
 * refused with every problem listed, and the running release stays. Other sections apply only at
 * the next start: a reload that finds them changed says which (test/e2e/agents-reload.test.ts).
 * A module's agents are imported afresh; its plugins, which run around every call's tools, change
 * only at the next start.
 */
import type { CallAgents } from '../../agents/agent-module.ts';
import type { AgentCatalogue } from '../../agents/agent.ts';
import { agentRelease, type AgentReleases } from '../../agents/agent-versions.ts';
import { agentsIssues } from '../../config/agents-schema.ts';
import type { Logger } from '../../config/log.ts';
import { counter } from '../../config/metrics.ts';
import { ConfigError } from '../../config/load.ts';
import type { Config } from '../../config/schema.ts';

export interface ReloadOutcome {
  readonly status: 'reloaded' | 'unchanged' | 'refused';
  /** The release new calls get now. */
  readonly version: string;
  /** The release new calls got before (when reloaded). */
  readonly previous?: string;
  readonly problems?: readonly string[];
  /** Sections of the file that changed but apply only after a restart. */
  readonly restartNeeded?: readonly string[];
}

export interface AgentReloadOptions {
  readonly releases: AgentReleases;
  /** The configuration the gateway runs with. */
  readonly running: Config;
  /** Reads and validates the configuration file again (throws ConfigError). */
  readonly load: () => Config;
  /** Compiles its agents, its module's imported afresh (throws ConfigError). */
  readonly compile: (config: Config) => Promise<CallAgents>;
  readonly log: Logger;
}

const reloads = counter<'outcome'>({
  name: 'callgate_agent_reloads_total',
  help: 'Reloads of the agents (SIGHUP or the operator API) by outcome: reloaded, unchanged, refused',
  labelNames: ['outcome'],
});

/**
 * Tenants whose entry agent the configuration does not define; a configuration without agents (a
 * worker's) has none to offer.
 */
export function missingEntryAgents(config: Config, catalogue: AgentCatalogue): string[] {
  return config.tenants.flatMap((tenant, t) =>
    tenant.mediaTest === undefined && catalogue.get(tenant.agent) === undefined
      ? [
          `tenants[${t}].agent: unknown agent ${tenant.agent}${config.agents === undefined ? ' (the configuration has no agents section)' : ''}`,
        ]
      : [],
  );
}

export async function reloadAgents(
  options: AgentReloadOptions,
  cause: string,
): Promise<ReloadOutcome> {
  const { releases, running, log } = options;
  const current = releases.current.version;
  let next: Config;
  let compiled: CallAgents;
  try {
    next = options.load();
    compiled = await options.compile(next);
  } catch (error) {
    const problems =
      error instanceof ConfigError
        ? error.problems
        : [error instanceof Error ? error.message : String(error)];
    return refused(log, cause, current, problems);
  }
  // The new agents must fit the tenants this gateway runs with, not only the file's.
  const against: Config = { ...running, agents: next.agents };
  const problems = [
    ...agentsIssues(against).map((issue) => `${issue.path.join('.')}: ${issue.message}`),
    ...missingEntryAgents(against, compiled.catalogue),
  ];
  if (problems.length > 0) return refused(log, cause, current, problems);
  const restartNeeded = changedSections(running, next);
  const { previous, next: release } = releases.replace(agentRelease(next, compiled.catalogue));
  const status = release.version === previous.version ? 'unchanged' : 'reloaded';
  reloads.inc({ outcome: status });
  log.info(status === 'reloaded' ? 'agents reloaded for new calls' : 'agents unchanged', {
    cause,
    version: release.version,
    previous: previous.version,
    ...(restartNeeded.length > 0 && { restart_needed: restartNeeded }),
  });
  return {
    status,
    version: release.version,
    ...(status === 'reloaded' && { previous: previous.version }),
    ...(restartNeeded.length > 0 && { restartNeeded }),
  };
}

function refused(
  log: Logger,
  cause: string,
  version: string,
  problems: readonly string[],
): ReloadOutcome {
  reloads.inc({ outcome: 'refused' });
  log.error('agents reload refused; the running agents stay', { cause, version, problems });
  return { status: 'refused', version, problems };
}

/** Top-level sections other than `agents` whose settings differ. */
function changedSections(running: Config, next: Config): string[] {
  return (Object.keys(next) as (keyof Config)[]).filter(
    (key) => key !== 'agents' && JSON.stringify(running[key]) !== JSON.stringify(next[key]),
  );
}
