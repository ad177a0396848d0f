/**
 * A tiny application on top of the built-in stack for the sipp tests: it answers (or not) each
 * call with an SDP answer and records every call and dialog event in order.
 */
import { Logger } from '../../config/log.ts';
import type { z } from 'zod';
import { sipSchema, tenantSchema } from '../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../gateway/sip/builtin-driver.ts';
import type { DialogEvent, InboundCall } from '../../gateway/sip/signaling-driver.ts';
import type { SipTimerOptions } from '../../gateway/sip/sip-timers.ts';

export interface TestAppOptions {
  /** Tenants as written in a configuration (defaults filled in by the schema). */
  readonly tenants?: readonly z.input<typeof tenantSchema>[];
  readonly timers?: SipTimerOptions;
  readonly secrets?: Readonly<Record<string, string>>;
  /** What to do with each call; answering at once by default. */
  readonly onCall?: (call: InboundCall, app: TestApp) => void;
  readonly sip?: Record<string, unknown>;
}

export interface TestApp {
  readonly driver: BuiltinSignalingDriver;
  readonly calls: InboundCall[];
  readonly events: Array<{ callId: string; event: DialogEvent }>;
  readonly udpPort: number;
  readonly tcpPort: number;
  maxConcurrent: number;
  answer(call: InboundCall): void;
  eventsOf(type: DialogEvent['type']): DialogEvent[];
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const tenants = (
    options.tenants ?? [
      {
        id: 'acme',
        numbers: ['100', '+15550100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
      },
    ]
  ).map((tenant) => tenantSchema.parse(tenant));
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, tcpPort: 0, ...options.sip }),
    tenants,
    logger: new Logger({ level: 'error' }),
    ...(options.timers !== undefined ? { timers: options.timers } : {}),
    readSecret: (name) => options.secrets?.[name],
  });
  let port = 30_000;
  let concurrent = 0;
  const app: TestApp = {
    driver,
    calls: [],
    events: [],
    udpPort: 0,
    tcpPort: 0,
    maxConcurrent: 0,
    answer(call) {
      port += 2;
      call.accept({ local: { address: '127.0.0.1', port } });
    },
    eventsOf(type) {
      return app.events.filter((entry) => entry.event.type === type).map((entry) => entry.event);
    },
    async waitFor(predicate, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error('condition not met in time');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    stop: () => driver.stop(),
  };
  driver.onCall((call) => {
    app.calls.push(call);
    call.dialog.on((event) => {
      app.events.push({ callId: call.callId, event });
      if (event.type === 'ack') {
        concurrent += 1;
        app.maxConcurrent = Math.max(app.maxConcurrent, concurrent);
      }
      if (event.type === 'ended' && call.dialog.media !== undefined) concurrent -= 1;
    });
    if (options.onCall !== undefined) options.onCall(call, app);
    else app.answer(call);
  });
  await driver.start();
  return Object.assign(app, { udpPort: driver.port('udp') ?? 0, tcpPort: driver.port('tcp') ?? 0 });
}
