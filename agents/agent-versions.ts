/**
 * Which agents a new call gets. A reload (SIGHUP, the operator API) replaces them for calls that
 * start after it; a call keeps the release it started with to its end, and its record and every
 * operation it starts carry that release's version. The version is a digest of the agents section
 * as loaded (instruction files read in), so the same agents have the same version on every
 * gateway (test/unit/agents/agent-versions.test.ts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import type { AgentCatalogue } from './agent.ts';

export interface AgentRelease {
  readonly version: string;
  readonly catalogue: AgentCatalogue;
}

export function agentVersion(config: Pick<Config, 'agents'>): string {
  const digest = createHash('sha256').update(canonicalJson(config.agents ?? null));
  // A module's agents are code: its source is part of the version.
  const module = config.agents?.module;
  if (module !== undefined && existsSync(module)) digest.update(readFileSync(module));
  return `av_${digest.digest('hex').slice(0, 12)}`;
}

/** The release of `config`'s agents, compiled (with its module's, if any) into `catalogue`. */
export function agentRelease(
  config: Pick<Config, 'agents'>,
  catalogue: AgentCatalogue,
): AgentRelease {
  return { version: agentVersion(config), catalogue };
}

export class AgentReleases {
  private release: AgentRelease;

  constructor(release: AgentRelease) {
    this.release = release;
  }

  /** The release a call starting now gets. */
  get current(): AgentRelease {
    return this.release;
  }

  /** New calls get `next` (unless it is the same version); returns the release they replace. */
  replace(next: AgentRelease): { readonly previous: AgentRelease; readonly next: AgentRelease } {
    const previous = this.release;
    if (next.version !== previous.version) this.release = next;
    return { previous, next: this.release };
  }
}

/** JSON with object keys sorted, so the digest does not depend on the order keys were written in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map(
        (key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`,
      )
      .join(',')}}`;
  return JSON.stringify(value);
}
