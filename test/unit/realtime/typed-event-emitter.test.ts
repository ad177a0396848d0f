import { describe, expect, it } from 'vitest';
import { TypedEventEmitter } from '../../../gateway/realtime/typed-event-emitter.ts';

type Event = { type: 'a'; n: number } | { type: 'b' };

describe('when events are emitted', () => {
  it('should deliver by type, then to every-event listeners, in the order they subscribed', () => {
    const emitter = new TypedEventEmitter<Event>();
    const seen: string[] = [];
    emitter.onAny((e) => seen.push(`any ${e.type}`));
    emitter.on('a', (e) => seen.push(`a1 ${e.n}`));
    emitter.on('a', (e) => seen.push(`a2 ${e.n}`));
    emitter.on('b', () => seen.push('b'));
    emitter.emit({ type: 'a', n: 1 });
    emitter.emit({ type: 'b' });
    expect(seen).toEqual(['a1 1', 'a2 1', 'any a', 'b', 'any b']);
  });

  it('should give each event to the listeners there when it was emitted', () => {
    const emitter = new TypedEventEmitter<Event>();
    const seen: string[] = [];
    const offs: (() => void)[] = [];
    // The first listener removes the second and adds a third while the event is delivered.
    offs.push(
      emitter.on('a', (e) => {
        seen.push(`first ${e.n}`);
        offs[1]?.();
        emitter.on('a', (later) => seen.push(`third ${later.n}`));
      }),
    );
    offs.push(emitter.on('a', (e) => seen.push(`second ${e.n}`)));
    emitter.emit({ type: 'a', n: 1 });
    offs[0]?.();
    emitter.emit({ type: 'a', n: 2 });
    expect(seen).toEqual(['first 1', 'second 1', 'third 2']);
  });

  it('should subscribe a listener once however often it is added, and remove it once', () => {
    const emitter = new TypedEventEmitter<Event>();
    let calls = 0;
    const listener = (): void => {
      calls++;
    };
    const off = emitter.on('b', listener);
    emitter.on('b', listener);
    const offAny = emitter.onAny(listener);
    emitter.onAny(listener);
    emitter.emit({ type: 'b' });
    off();
    offAny();
    emitter.emit({ type: 'b' });
    expect(calls).toBe(2);
  });

  it('should report a throwing listener and still deliver to the others', () => {
    const errors: string[] = [];
    const emitter = new TypedEventEmitter<Event>({
      onListenerError: (error, type) => errors.push(`${type}: ${(error as Error).message}`),
    });
    const seen: number[] = [];
    emitter.on('a', () => {
      throw new Error('listener broke');
    });
    emitter.on('a', (e) => seen.push(e.n));
    emitter.emit({ type: 'a', n: 7 });
    expect(errors).toEqual(['a: listener broke']);
    expect(seen).toEqual([7]);
  });
});
