import { describe, expect, it } from 'vitest';
import { agentCatalogue } from '../../../agents/agent-config.ts';
import { agentRelease, agentVersion, AgentReleases } from '../../../agents/agent-versions.ts';
import { EXAMPLE_CONFIG_PATH, loadConfig } from '../../../config/load.ts';

const config = loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} });

describe('when the agents of a configuration are versioned', () => {
  it('should give the same agents the same version whatever the key order, and other agents another', () => {
    const agents = config.agents;
    if (agents === undefined) throw new Error('the example has agents');
    const reordered = JSON.parse(
      JSON.stringify({ list: agents.list, tools: agents.tools }),
    ) as typeof agents;
    expect(agentVersion({ agents: reordered })).toBe(agentVersion(config));
    const edited = {
      ...agents,
      list: agents.list.map((a, i) => (i === 0 ? { ...a, instructions: `${a.instructions}!` } : a)),
    };
    expect(agentVersion({ agents: edited })).not.toBe(agentVersion(config));
    expect(agentVersion(config)).toMatch(/^av_[0-9a-f]{12}$/);
  });

  it('should hand new calls the new release and leave the one a call holds as it was', () => {
    const releases = new AgentReleases(agentRelease(config, agentCatalogue(config)));
    const held = releases.current;
    const agents = config.agents;
    if (agents === undefined) throw new Error('the example has agents');
    const fewer = { agents: { ...agents, list: agents.list.filter((a) => a.name !== 'billing') } };
    const { previous, next } = releases.replace(agentRelease(fewer, agentCatalogue(fewer)));
    expect(previous).toBe(held);
    expect(next.version).not.toBe(held.version);
    expect(releases.current).toBe(next);
    expect(held.catalogue.get('billing')).toBeDefined();
    expect(releases.current.catalogue.get('billing')).toBeUndefined();
    // The same agents again: nothing changes.
    expect(releases.replace(agentRelease(fewer, agentCatalogue(fewer))).next).toBe(next);
  });
});
