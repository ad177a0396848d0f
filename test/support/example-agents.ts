/**
 * The agents of the bundled example configuration (the restaurant demo), compiled as a gateway
 * compiles them. Harnesses whose own configuration carries only the actions a test drives (and
 * so no agents section) answer calls with these.
 */
import type { AgentCatalogue, AgentDefinition } from '../../agents/agent.ts';
import { agentCatalogue, compileAgents } from '../../agents/agent-config.ts';
import { EXAMPLE_CONFIG_PATH, loadConfig } from '../../config/load.ts';

const exampleConfig = loadConfig({ path: EXAMPLE_CONFIG_PATH, env: {} });

export function exampleCatalogue(): AgentCatalogue {
  return agentCatalogue(exampleConfig);
}

export function exampleAgent(name: string): AgentDefinition {
  const agent = compileAgents(exampleConfig).find((a) => a.name === name);
  if (agent === undefined) throw new Error(`the example configuration has no agent ${name}`);
  return agent;
}
