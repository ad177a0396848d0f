/**
 * The ResponseHandle a session gives for each response asked of it, driven by whoever owns the
 * request (the session's ResponseSequencer). It settles exactly once, done or refused; later
 * facts are ignored (test/unit/realtime/response-handle.test.ts).
 */
import type {
  RefusalReason,
  ResponseEnd,
  ResponseHandle,
  ResponseStatus,
} from './realtime-session.ts';

type DoneEnd = Extract<ResponseEnd, { type: 'done' }>;

export interface RequestedResponseOptions {
  /** A listener threw: reported, never left to break the protocol loop that drove the handle. */
  onListenerError?: (error: unknown) => void;
}

export class RequestedResponse implements ResponseHandle {
  readonly ended: Promise<ResponseEnd>;
  private id: string | undefined;
  private readonly outputItems: string[] = [];
  private result: ResponseEnd | undefined;
  private resolveEnded: (end: ResponseEnd) => void = () => undefined;
  private readonly onListenerError: (error: unknown) => void;
  private createdListeners: ((responseId: string) => void)[] = [];
  private itemListeners: ((itemId: string) => void)[] = [];
  private doneListeners: ((end: DoneEnd) => void)[] = [];
  private refusedListeners: ((reason: RefusalReason) => void)[] = [];

  constructor(options: RequestedResponseOptions = {}) {
    this.onListenerError = options.onListenerError ?? (() => undefined);
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
  }

  get responseId(): string | undefined {
    return this.id;
  }

  get items(): readonly string[] {
    return this.outputItems;
  }

  get end(): ResponseEnd | undefined {
    return this.result;
  }

  onCreated(listener: (responseId: string) => void): () => void {
    if (this.id !== undefined) this.call(listener, this.id);
    else if (this.result === undefined) this.createdListeners.push(listener);
    return () => (this.createdListeners = this.createdListeners.filter((l) => l !== listener));
  }

  onItem(listener: (itemId: string) => void): () => void {
    for (const itemId of this.outputItems) this.call(listener, itemId);
    if (this.result === undefined) this.itemListeners.push(listener);
    return () => (this.itemListeners = this.itemListeners.filter((l) => l !== listener));
  }

  onDone(listener: (end: DoneEnd) => void): () => void {
    if (this.result?.type === 'done') this.call(listener, this.result);
    else if (this.result === undefined) this.doneListeners.push(listener);
    return () => (this.doneListeners = this.doneListeners.filter((l) => l !== listener));
  }

  onRefused(listener: (reason: RefusalReason) => void): () => void {
    if (this.result?.type === 'refused') this.call(listener, this.result.reason);
    else if (this.result === undefined) this.refusedListeners.push(listener);
    return () => (this.refusedListeners = this.refusedListeners.filter((l) => l !== listener));
  }

  /** The provider created the response; only the first id counts. */
  markCreated(responseId: string): void {
    if (this.id !== undefined || this.result !== undefined) return;
    this.id = responseId;
    for (const listener of this.createdListeners) this.call(listener, responseId);
    this.createdListeners = [];
  }

  /** An output item of the response appeared (audio or a function call), once per item. */
  markItem(itemId: string): void {
    if (this.id === undefined || this.result !== undefined || this.outputItems.includes(itemId))
      return;
    this.outputItems.push(itemId);
    for (const listener of this.itemListeners) this.call(listener, itemId);
  }

  /** The response is over on the model's side; ignored unless it was created and has not ended. */
  markDone(status: ResponseStatus, reason?: string): void {
    if (this.id === undefined || this.result !== undefined) return;
    const end: DoneEnd = {
      type: 'done',
      responseId: this.id,
      status,
      ...(reason !== undefined && { reason }),
    };
    const listeners = this.doneListeners;
    this.settle(end);
    for (const listener of listeners) this.call(listener, end);
  }

  /** It will never be created; ignored once created or ended. */
  markRefused(reason: RefusalReason): void {
    if (this.id !== undefined || this.result !== undefined) return;
    const listeners = this.refusedListeners;
    this.settle({ type: 'refused', reason });
    for (const listener of listeners) this.call(listener, reason);
  }

  /** The session closed: a running response ends failed, one not yet created is refused. */
  markClosed(): void {
    if (this.id === undefined) this.markRefused('closed');
    else this.markDone('failed', 'closed');
  }

  private settle(end: ResponseEnd): void {
    this.result = end;
    this.createdListeners = [];
    this.itemListeners = [];
    this.doneListeners = [];
    this.refusedListeners = [];
    this.resolveEnded(end);
  }

  private call<A>(listener: (arg: A) => void, arg: A): void {
    try {
      listener(arg);
    } catch (error) {
      this.onListenerError(error);
    }
  }
}
