/**
 * A small emitter for discriminated unions: listeners subscribe by `type` and receive the
 * narrowed event. A throwing listener is reported to `onListenerError` and does not stop the
 * other listeners or the protocol loop that emitted the event.
 */
export interface TypedEventEmitterOptions {
  onListenerError?: (error: unknown, eventType: string) => void;
}

export class TypedEventEmitter<E extends { type: string }> {
  // Listener lists are replaced on every change, never changed in place: an emit holds the lists
  // it started with (a listener added or removed meanwhile counts from the next event), and
  // nothing is copied per event, which matters at hundreds of audio deltas a second.
  private readonly byType = new Map<string, readonly ((event: E) => void)[]>();
  private any: readonly ((event: E) => void)[] = [];
  private readonly onListenerError: (error: unknown, eventType: string) => void;

  constructor(options: TypedEventEmitterOptions = {}) {
    this.onListenerError = options.onListenerError ?? (() => undefined);
  }

  on<T extends E['type']>(type: T, listener: (event: Extract<E, { type: T }>) => void): () => void {
    const wrapped = listener as (event: E) => void;
    const current = this.byType.get(type) ?? [];
    if (!current.includes(wrapped)) this.byType.set(type, [...current, wrapped]);
    return () => {
      const now = this.byType.get(type);
      if (now?.includes(wrapped) === true)
        this.byType.set(
          type,
          now.filter((l) => l !== wrapped),
        );
    };
  }

  onAny(listener: (event: E) => void): () => void {
    if (!this.any.includes(listener)) this.any = [...this.any, listener];
    return () => {
      this.any = this.any.filter((l) => l !== listener);
    };
  }

  emit(event: E): void {
    const typed = this.byType.get(event.type);
    const any = this.any;
    if (typed !== undefined) {
      for (let i = 0; i < typed.length; i++) this.deliver(typed[i], event);
    }
    for (let i = 0; i < any.length; i++) this.deliver(any[i], event);
  }

  removeAll(): void {
    this.byType.clear();
    this.any = [];
  }

  private deliver(listener: ((event: E) => void) | undefined, event: E): void {
    try {
      listener?.(event);
    } catch (error) {
      this.onListenerError(error, event.type);
    }
  }
}
