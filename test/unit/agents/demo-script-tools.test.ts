import { describe, expect, it } from 'vitest';
import { loadSimulatorScript } from '../../../gateway/realtime/simulator/simulator-script.ts';
import { exampleAgent, exampleCatalogue } from '../../support/example-agents.ts';

describe('when the bundled demo script calls tools', () => {
  it('should only call tools some example agent has, with arguments its schema accepts', async () => {
    const script = await loadSimulatorScript();
    const catalogue = exampleCatalogue();
    const tools = catalogue.names().flatMap((name) => catalogue.get(name)?.tools ?? []);
    const steps = [...Object.values(script.digits), ...Object.values(script.utterances)];
    const calls = steps.flatMap((step) => step.tools ?? []);
    expect(calls.length).toBeGreaterThan(5);
    for (const call of calls) {
      const tool = tools.find((t) => t.name === call.name);
      expect(tool, call.name).toBeDefined();
      const parsed = tool?.parameters.safeParse(call.arguments);
      expect(
        parsed?.success,
        `${call.name} ${JSON.stringify(call.arguments)}: ${JSON.stringify(parsed?.error?.issues)}`,
      ).toBe(true);
    }
  });

  it('should hand off before an action the answering concierge does not have', async () => {
    const script = await loadSimulatorScript();
    const concierge = exampleAgent('concierge');
    for (const step of Object.values(script.digits)) {
      const names = (step.tools ?? []).map((t) => t.name);
      const firstForeign = names.findIndex((n) => !concierge.tools.some((t) => t.name === n));
      if (firstForeign >= 0) expect(names.indexOf('handoff')).toBeLessThan(firstForeign);
    }
  });
});
