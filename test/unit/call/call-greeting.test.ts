import { describe, expect, it } from 'vitest';
import { AgentCatalogue } from '../../../agents/agent.ts';
import { greetingResponse } from '../../../gateway/call/model-link.ts';
import { exampleAgent } from '../../support/example-agents.ts';
import { settle, startCall } from './call-harness.ts';

const GREETING = 'Good evening, thank you for calling the Blue Harbour. How can I help?';

/** The example's agents, the entry agent (concierge) with a greeting, a voice and a model of its own. */
function greetingCatalogue(): AgentCatalogue {
  return new AgentCatalogue([
    {
      ...exampleAgent('concierge'),
      greeting: GREETING,
      voice: 'cedar',
      model: 'gpt-realtime-mini',
    },
    exampleAgent('reservations'),
    exampleAgent('billing'),
  ]);
}

describe('when the entry agent has a greeting', () => {
  it('should ask for the greeting as the first response of the call, on its model and voice', async () => {
    const h = await startCall({ catalogue: greetingCatalogue() });
    const model = h.model();
    expect(model.openedWith?.model).toBe('gpt-realtime-mini');
    expect(model.configurations[0]?.voice).toBe('cedar');
    expect(model.requests).toEqual([greetingResponse(GREETING)]);
    expect(model.requests[0]?.instructions).toContain(`"${GREETING}"`);
  });

  it('should not greet again on a session re-opened after a loss', async () => {
    const h = await startCall({ catalogue: greetingCatalogue() });
    h.model().emit({ type: 'disconnected', reason: 'network', detail: 'lost' });
    await settle();
    const reopened = h.model();
    expect(h.sessions).toHaveLength(2);
    expect(reopened.openedWith?.model).toBe('gpt-realtime-mini');
    expect(reopened.requests).toEqual([{}]);
  });
});

describe('when the entry agent has no greeting', () => {
  it('should let the model open the conversation, with the configured default model and voice', async () => {
    const h = await startCall();
    const model = h.model();
    expect(model.requests).toEqual([{}]);
    expect(model.openedWith?.model).toBeUndefined();
    expect(model.configurations[0]?.voice).toBeUndefined();
  });
});
