/** What a test opened, closed after each test: the last opened first, each even if another fails. */
import { afterEach } from 'vitest';

export type Closable = { stop(): unknown } | { close(): unknown };

/** Registers the afterEach; the returned function takes a resource into its care and returns it. */
export function closeAfterEach(): <T extends Closable>(resource: T) => T {
  const opened: Closable[] = [];
  afterEach(async () => {
    const failures: unknown[] = [];
    for (const resource of opened.splice(0).reverse()) {
      try {
        await ('stop' in resource ? resource.stop() : resource.close());
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0)
      throw new AggregateError(failures, 'closing what the test opened failed');
  });
  return (resource) => {
    opened.push(resource);
    return resource;
  };
}
