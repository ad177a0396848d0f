/**
 * Routes each OpenAI Realtime server event to the one handler for its type. No logic here: what
 * an event means is its handler's business. Types without a handler (content parts, item
 * lifecycle, rate limits) are events callgate does not act on.
 */
import type { ServerEvent, ServerEventType } from './openai-protocol.ts';

export type ServerEventOf<T extends ServerEventType> = Extract<ServerEvent, { type: T }>;

/** At most one handler per server event type. */
export type ServerEventHandlers = {
  readonly [T in ServerEventType]?: (event: ServerEventOf<T>) => void;
};

export function dispatchServerEvent(event: ServerEvent, handlers: ServerEventHandlers): void {
  const handler = handlers[event.type] as ((event: ServerEvent) => void) | undefined;
  handler?.(event);
}
