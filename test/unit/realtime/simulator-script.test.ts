import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import {
  loadSimulatorScript,
  parseSimulatorScript,
  renderTemplate,
} from '../../../gateway/realtime/simulator/simulator-script.ts';

describe('when the bundled demo script is loaded', () => {
  it('should offer the menu choices as digit steps, handing off to the agent that owns each action', async () => {
    const script = await loadSimulatorScript();
    expect(Object.keys(script.digits).sort()).toEqual(['*', '1', '2', '3', '4', '5']);
    const names = (digit: string) => script.digits[digit]?.tools?.map((t) => t.name);
    expect(names('1')).toEqual(['handoff', 'book_table']);
    expect(names('2')).toEqual(['handoff', 'refund']);
    expect(names('3')).toEqual(['transfer_to_human']);
    expect(names('4')).toEqual(['handoff', 'book_table']);
    expect(names('5')).toEqual(['handoff', 'check_availability', 'check_availability']);
    expect(names('*')).toEqual(['cancel_operation']);
  });

  it('should book a table when the caller just speaks', async () => {
    const script = await loadSimulatorScript();
    expect(script.utterances['1']?.tools?.map((t) => t.name)).toEqual([
      'handoff',
      'check_availability',
    ]);
    expect(script.utterances['2']?.tools?.[0]).toMatchObject({
      name: 'book_table',
      arguments: { party_size: 4 },
    });
  });
});

describe('when a script is invalid', () => {
  it.each([
    ['not YAML at all', 'greeting: [unclosed'],
    ['a missing greeting', 'fallback: hi'],
    ['a step with nothing to do', 'greeting: hi\nfallback: hi\ndigits:\n  "1": {}\n'],
    ['a digit that is not DTMF', 'greeting: hi\nfallback: hi\ndigits:\n  "x": { say: hi }\n'],
    ['an unknown key', 'greeting: hi\nfallback: hi\nmood: happy\n'],
    [
      'a bad tool name',
      'greeting: hi\nfallback: hi\nutterances:\n  "1": { tools: [{ name: "no spaces" }] }\n',
    ],
  ])('should refuse %s with CALLGATE_ERR_SIMULATOR_SCRIPT', (_name, text) => {
    let caught: unknown;
    try {
      parseSimulatorScript(text, 'test.yaml');
    } catch (error) {
      caught = error;
    }
    expect(isCallgateError(caught, 'CALLGATE_ERR_SIMULATOR_SCRIPT')).toBe(true);
  });

  it('should accept JSON as well as YAML', () => {
    expect(parseSimulatorScript('{"greeting":"hi","fallback":"what?"}').greeting).toBe('hi');
  });

  it('should report a missing file with the same code', async () => {
    await expect(loadSimulatorScript('/nonexistent/script.yaml')).rejects.toMatchObject({
      code: 'CALLGATE_ERR_SIMULATOR_SCRIPT',
    });
  });
});

describe('when a line is templated', () => {
  it.each([
    ['{output.status}', { output: '{"status":"confirmed"}' }, 'confirmed'],
    ['{output.booking.time} ok', { output: '{"booking":{"time":"19:30"}}' }, '19:30 ok'],
    ['{output.missing|no value}', { output: '{}' }, 'no value'],
    ['{output.missing}', { output: '{}' }, 'unknown'],
    ['{output.n}', { output: '{"n":4}' }, '4'],
    ['{output.obj|fallback}', { output: '{"obj":{}}' }, 'fallback'],
    ['{output}', { output: 'plain text' }, 'plain text'],
    ['{output.x|x}', { output: 'not json' }, 'x'],
    ['{tool} said {output.m|}', { tool: 'refund', output: '{}' }, 'refund said '],
    ['note: {text}', { text: 'the booking is confirmed' }, 'note: the booking is confirmed'],
    ['{unknown} stays', {}, '{unknown} stays'],
  ])('should render %s', (template, values, expected) => {
    expect(renderTemplate(template, values)).toBe(expected);
  });
});
