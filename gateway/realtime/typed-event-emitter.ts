/**
 * A small emitter for discriminated unions: listeners subscribe by `type` and receive the
 * narrowed event. A throwing listener is reported to `onListenerError` and does not stop the
 * other listeners or the protocol loop that emitted the event.
 */
export interface TypedEventEmitterOptions {
  onListenerError?: (error: unknown, eventType: string) => void;
}

export class TypedEventEmitter<E extends { type: string }> {
  private readonly byType = new Map<string, Set<(event: E) => void>>();
  private readonly any = new Set<(event: E) => void>();
  private readonly onListenerError: (error: unknown, eventType: string) => void;

  constructor(options: TypedEventEmitterOptions = {}) {
    this.onListenerError = options.onListenerError ?? (() => undefined);
  }

  on<T extends E['type']>(type: T, listener: (event: Extract<E, { type: T }>) => void): () => void {
    let set = this.byType.get(type);
    if (set === undefined) {
      set = new Set();
      this.byType.set(type, set);
    }
    const wrapped = listener as (event: E) => void;
    set.add(wrapped);
    return () => set.delete(wrapped);
  }

  onAny(listener: (event: E) => void): () => void {
    this.any.add(listener);
    return () => this.any.delete(listener);
  }

  emit(event: E): void {
    for (const listener of [...(this.byType.get(event.type) ?? []), ...this.any]) {
      try {
        listener(event);
      } catch (error) {
        this.onListenerError(error, event.type);
      }
    }
  }

  removeAll(): void {
    this.byType.clear();
    this.any.clear();
  }
}
