/**
 * Which agents a new call gets. A reload (SIGHUP, the operator API) replaces them for calls that
 * start after it; a call keeps the release it started with to its end, and its record and every
 * operation it starts carry that release's version. The version is a digest of the agents section
 * as loaded (instruction files read in), so the same agents have the same version on every
 * gateway (test/unit/agents/agent-versions.test.ts).
 */
import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.ts';
import { agentCatalogue } from './agent-config.ts';
import type { AgentCatalogue } from './agent.ts';

export interface AgentRelease {
  readonly version: string;
  readonly catalogue: AgentCatalogue;
}

export function agentVersion(config: Pick<Config, 'agents'>): string {
  const digest = createHash('sha256')
    .update(canonicalJson(config.agents ?? null))
    .digest('hex');
  return `av_${digest.slice(0, 12)}`;
}

export function agentRelease(config: Pick<Config, 'agents'>): AgentRelease {
  return { version: agentVersion(config), catalogue: agentCatalogue(config) };
}

export class AgentReleases {
  private release: AgentRelease;

  constructor(config: Pick<Config, 'agents'>) {
    this.release = agentRelease(config);
  }

  /** The release a call starting now gets. */
  get current(): AgentRelease {
    return this.release;
  }

  /** New calls get `config`'s agents; returns the release they replace. */
  replace(config: Pick<Config, 'agents'>): {
    readonly previous: AgentRelease;
    readonly next: AgentRelease;
  } {
    const previous = this.release;
    const next = agentRelease(config);
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
