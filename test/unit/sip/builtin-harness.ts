/**
 * The built-in stack on loopback for the tests that drive it with a hand-written peer: a driver
 * with short timers that answers every call (or not), the events of each dialog, and a UDP peer.
 */
import { Logger } from '../../../config/log.ts';
import { sipSchema, tenantSchema } from '../../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../../gateway/sip/builtin-driver.ts';
import type { DialogEvent, InboundCall } from '../../../gateway/sip/signaling-driver.ts';
import { UdpSipPeer } from './udp-sip-peer.ts';

/** T1 of these tests: 64*T1 (Timers B, F, H, J, M and the ACK wait) is 640 ms. */
export const T1_MS = 10;
export const TIMEOUT_64_T1_MS = 64 * T1_MS;

export interface BuiltinHarness {
  readonly driver: BuiltinSignalingDriver;
  readonly port: number;
  readonly peer: UdpSipPeer;
  readonly calls: InboundCall[];
  /** Every dialog event, by Call-ID, in order. */
  readonly events: Map<string, DialogEvent[]>;
  /** What the stack logged at warn and above. */
  readonly logs: string[];
  stop(): Promise<void>;
}

export async function startBuiltin(options: { answer?: boolean } = {}): Promise<BuiltinHarness> {
  const logs: string[] = [];
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({ listen: '127.0.0.1', udpPort: 0, transports: ['udp'] }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
      }),
    ],
    logger: new Logger({ level: 'warn', sink: { write: (line: string) => logs.push(line) } }),
    timers: { t1Ms: T1_MS, t2Ms: 4 * T1_MS, t4Ms: 5 * T1_MS },
  });
  const calls: InboundCall[] = [];
  const events = new Map<string, DialogEvent[]>();
  driver.onCall((call) => {
    calls.push(call);
    const list: DialogEvent[] = [];
    events.set(call.callId, list);
    call.dialog.on((event) => list.push(event));
    if (options.answer !== false) call.accept({ local: { address: '127.0.0.1', port: 40_000 } });
  });
  await driver.start();
  const peer = await UdpSipPeer.open();
  return {
    driver,
    port: driver.port('udp') ?? 0,
    peer,
    calls,
    events,
    logs,
    async stop() {
      peer.close();
      await driver.stop();
    },
  };
}

export const sdp = (port: number, extra = ''): string =>
  `v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio ${port} RTP/AVP 0\r\n${extra}`;

export const toTagOf = (response: string): string =>
  /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(response)?.[1] ?? '';

/** Starts a call with an SDP offer and ACKs its 200; resolves once the dialog reported the ACK. */
export async function confirmedCall(h: BuiltinHarness, callId: string): Promise<{ toTag: string }> {
  h.peer.send(
    h.peer.request('INVITE', {
      callId,
      headers: { 'Content-Type': 'application/sdp' },
      body: sdp(4000),
    }),
    h.port,
  );
  const ok = await h.peer.waitFor(callId, /^SIP\/2\.0 200 /);
  const toTag = toTagOf(ok);
  h.peer.send(h.peer.request('ACK', { callId, toTag }), h.port);
  await waitUntil(() => (h.events.get(callId) ?? []).some((event) => event.type === 'ack'));
  return { toTag };
}

export async function waitUntil(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(5);
  }
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** The status lines of the responses to `method` among `messages`. */
export const statusLines = (messages: readonly string[], method: string): string[] =>
  messages
    .filter(
      (text) =>
        text.startsWith('SIP/2.0 ') && new RegExp(`\\r\\nCSeq: \\d+ ${method}\\r\\n`).test(text),
    )
    .map((text) => text.split('\r\n')[0] ?? '');
