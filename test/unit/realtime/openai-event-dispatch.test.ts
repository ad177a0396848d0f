import { describe, expect, it } from 'vitest';
import {
  dispatchServerEvent,
  type ServerEventHandlers,
} from '../../../gateway/realtime/openai-event-dispatch.ts';
import type { ServerEvent } from '../../../gateway/realtime/openai-protocol.ts';

describe('when a server event is dispatched', () => {
  it('should call the one handler of its type with the event, and no other', () => {
    const calls: string[] = [];
    const handlers: ServerEventHandlers = {
      'input_audio_buffer.speech_stopped': (event) =>
        calls.push(`stopped:${event.item_id}:${event.audio_end_ms}`),
      'input_audio_buffer.cleared': () => calls.push('cleared'),
    };
    dispatchServerEvent(
      {
        type: 'input_audio_buffer.speech_stopped',
        event_id: 'e1',
        item_id: 'item_1',
        audio_end_ms: 640,
      },
      handlers,
    );
    dispatchServerEvent({ type: 'input_audio_buffer.cleared', event_id: 'e2' }, handlers);
    expect(calls).toEqual(['stopped:item_1:640', 'cleared']);
  });

  it('should do nothing for a known type callgate does not act on', () => {
    const calls: string[] = [];
    const event = {
      type: 'input_audio_buffer.committed',
      event_id: 'e3',
      previous_item_id: null,
      item_id: 'item_2',
    } satisfies ServerEvent;
    dispatchServerEvent(event, { 'input_audio_buffer.cleared': () => calls.push('cleared') });
    expect(calls).toEqual([]);
  });

  it('should let a handler that throws reach the caller, which reports it', () => {
    const handlers: ServerEventHandlers = {
      'input_audio_buffer.cleared': () => {
        throw new Error('unreadable');
      },
    };
    expect(() =>
      dispatchServerEvent({ type: 'input_audio_buffer.cleared', event_id: 'e4' }, handlers),
    ).toThrow('unreadable');
  });
});
