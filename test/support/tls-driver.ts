/**
 * The built-in stack with a TLS listener on loopback for the TLS tests: certificates from
 * test/support/tls-certs.ts, short timers, a tenant on allowFrom (number 100) and, when asked, a
 * mutual-TLS tenant (number 200) that expects the client certificate named `trunk.example`.
 */
import { Logger } from '../../config/log.ts';
import { sipSchema, tenantSchema } from '../../config/schema.ts';
import { BuiltinSignalingDriver } from '../../gateway/sip/builtin-driver.ts';
import type { InboundCall } from '../../gateway/sip/signaling-driver.ts';
import type { TestPki } from './tls-certs.ts';

export interface TlsDriver {
  readonly driver: BuiltinSignalingDriver;
  readonly port: number;
  readonly calls: InboundCall[];
  readonly logs: string[];
  stop(): Promise<void>;
}

export interface TlsDriverOptions {
  readonly tls?: Record<string, unknown>;
  /** The mutual-TLS tenant's expectation (default: name trunk.example). */
  readonly mutual?: Record<string, unknown>;
  /** Other sip settings (tcpIdleTimeoutMs, maxMessageBytes). */
  readonly sip?: Record<string, unknown>;
}

export async function startTlsDriver(
  pki: TestPki,
  options: TlsDriverOptions = {},
): Promise<TlsDriver> {
  const logs: string[] = [];
  const driver = new BuiltinSignalingDriver({
    sip: sipSchema.parse({
      listen: '127.0.0.1',
      tlsPort: 0,
      transports: ['tls'],
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey, ...options.tls },
      ...options.sip,
    }),
    tenants: [
      tenantSchema.parse({
        id: 'acme',
        numbers: ['100'],
        agent: 'front-desk',
        trunk: { allowFrom: ['127.0.0.0/8'] },
      }),
      tenantSchema.parse({
        id: 'secure',
        numbers: ['200'],
        agent: 'front-desk',
        tls: { caFile: pki.caCert, name: 'trunk.example', mutual: true, ...options.mutual },
      }),
    ],
    logger: new Logger({ level: 'info', sink: { write: (line: string) => logs.push(line) } }),
    timers: { t1Ms: 10, t2Ms: 40, t4Ms: 50 },
  });
  const calls: InboundCall[] = [];
  driver.onCall((call) => {
    calls.push(call);
    call.accept({ local: { address: '127.0.0.1', port: 40_000 } });
  });
  await driver.start();
  return {
    driver,
    port: driver.port('tls') ?? 0,
    calls,
    logs,
    stop: () => driver.stop(),
  };
}

export const OFFER =
  'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n';
