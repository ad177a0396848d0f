import { describe, expect, it } from 'vitest';
import { greetingResponse } from '../../../gateway/call/model-link.ts';
import { SimulatorSession } from '../../../gateway/realtime/simulator/simulator-session.ts';
import { parseSimulatorScript } from '../../../gateway/realtime/simulator/simulator-script.ts';

const script = parseSimulatorScript(`
greeting: Press 1 to book.
fallback: Anything else?
`);

function simulator(): { session: SimulatorSession; create: (response?: object) => void } {
  const session = new SimulatorSession({
    script,
    synthesizer: { render: () => Promise.resolve(Buffer.alloc(800, 0x55)) },
    model: 'gpt-realtime',
    deterministic: true,
    speechSpeed: 0,
    functionCallGapMs: 0,
    transport: { send: () => undefined, close: () => undefined },
  });
  const send = (event: Record<string, unknown>): void => session.receive(JSON.stringify(event));
  send({ type: 'session.update', session: { type: 'realtime' } });
  return { session, create: (response) => send({ type: 'response.create', response }) };
}

async function spoken(session: SimulatorSession, count: number): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  while (session.said.length < count && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 5));
  return session.said.map((line) => line.text);
}

describe("when a call's first response asks for a configured greeting", () => {
  it('should say the quoted greeting instead of the script greeting, and not greet again', async () => {
    const { session, create } = simulator();
    create(greetingResponse('Good evening, Blue Harbour.'));
    expect(await spoken(session, 1)).toEqual(['Good evening, Blue Harbour.']);
    create();
    expect(await spoken(session, 2)).toEqual(['Good evening, Blue Harbour.', 'Anything else?']);
  });

  it('should keep to the script for instructions that quote no line', async () => {
    const { session, create } = simulator();
    create({ instructions: 'greet' });
    expect(await spoken(session, 1)).toEqual(['Press 1 to book.']);
  });
});
