/**
 * A system of record behind a proxy, over HTTP on 127.0.0.1, for the cases the sandbox does not
 * inject: the backend commits a refund and the proxy in front of it answers 5xx anyway (502 when
 * the backend dropped the connection after its commit, 504 when it answered too late). It follows
 * the generic HTTP provider convention (POST /{operation}, GET /operations/{id}) and counts every
 * request and every effect, so a test asserts how many refunds really happened.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpProvider, OPERATION_ID_HEADER } from '../../../jobs/providers/http-provider.ts';

/** What happens to request number `n` (1-based): the backend acts or turns it away, the proxy may replace its answer. */
export interface ExchangePlan {
  /** `commit`: the backend writes the refund (or, keyed and seen before, replays its answer); `refuse`: a 503 of its own, no effect. */
  readonly backend: 'commit' | 'refuse';
  /** The proxy's answer instead of the backend's (status and a text body), as gateways send them. */
  readonly proxy?: { readonly status: number; readonly text: string };
}

export interface ProxiedProviderOptions {
  readonly name: string;
  readonly honoursIdempotencyKeys: boolean;
  readonly plan: (n: number) => ExchangePlan;
}

export interface Effect {
  readonly reference: string;
  readonly idempotencyKey: string;
  readonly refundId: string;
}

export interface ProxiedProvider {
  readonly provider: HttpProvider;
  /** Every execute request received, in order (with its idempotency key). */
  readonly requests: readonly { readonly reference: string; readonly idempotencyKey: string }[];
  /** Every refund written. */
  readonly effects: readonly Effect[];
  close(): Promise<void>;
}

export async function startProxiedProvider(
  options: ProxiedProviderOptions,
): Promise<ProxiedProvider> {
  const requests: { reference: string; idempotencyKey: string }[] = [];
  const effects: Effect[] = [];
  const answers = new Map<string, string>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    for await (const _chunk of req) void _chunk;
    const reference = String(req.headers[OPERATION_ID_HEADER.toLowerCase()] ?? '');
    const idempotencyKey = String(req.headers['idempotency-key'] ?? '');
    const lookup = /^\/operations\/([^/?]+)$/.exec(req.url ?? '');
    if (req.method === 'GET' && lookup) {
      const effect = effects.find((e) => e.reference === decodeURIComponent(lookup[1] ?? ''));
      if (!effect) return send(res, 404, JSON.stringify({ status: 'not_found' }));
      return send(
        res,
        200,
        JSON.stringify({
          status: 'committed',
          result: { refund_id: effect.refundId },
          provider_ref: effect.refundId,
        }),
      );
    }
    if (req.method !== 'POST' || req.url !== '/refund')
      return send(
        res,
        404,
        JSON.stringify({ error: { code: 'not_found', message: 'no such endpoint' } }),
      );
    requests.push({ reference, idempotencyKey });
    const plan = options.plan(requests.length);
    let status: number;
    let text: string;
    if (plan.backend === 'refuse') {
      status = 503;
      text = JSON.stringify({ error: { code: 'overloaded', message: 'not taking requests now' } });
    } else {
      const replay = options.honoursIdempotencyKeys ? answers.get(idempotencyKey) : undefined;
      if (replay !== undefined) {
        text = replay;
      } else {
        const refundId = `rf_${effects.length + 1}`;
        effects.push({ reference, idempotencyKey, refundId });
        text = JSON.stringify({ result: { refund_id: refundId }, provider_ref: refundId });
        answers.set(idempotencyKey, text);
      }
      status = 201;
    }
    if (plan.proxy) return send(res, plan.proxy.status, plan.proxy.text);
    send(res, status, text);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const provider = new HttpProvider({
    name: options.name,
    baseUrl: `http://127.0.0.1:${port}`,
    honoursIdempotencyKeys: options.honoursIdempotencyKeys,
    supportsCancel: false,
    timeoutMs: 2_000,
  });
  return {
    provider,
    requests,
    effects,
    close: async () => {
      await provider.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function send(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': text.startsWith('{') ? 'application/json' : 'text/plain',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
