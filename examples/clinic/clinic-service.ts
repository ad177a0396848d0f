/**
 * A clinic's appointment book over HTTP, following callgate's HTTP provider contract
 * (docs/your-own-agent.md): POST /{operation} with the arguments as JSON, deduplicated by the
 * Idempotency-Key header; GET /operations/{id} answers what happened to callgate's operation id.
 * Thirty lines of node:http, in memory. Run it with `npx tsx examples/clinic/clinic-service.ts`.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { pathToFileURL } from 'node:url';

export interface Booked {
  readonly operation: string;
  readonly headers: IncomingMessage['headers'];
  readonly args: Record<string, unknown>;
  readonly result: { readonly appointment_id: string };
}

export function clinicService(): { server: Server; booked: Booked[] } {
  const booked: Booked[] = [];
  const byKey = new Map<string, Booked>();
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const reply = (status: number, value: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const lookup = /^\/operations\/([^/]+)$/.exec(req.url ?? '');
      if (req.method === 'GET' && lookup) {
        const found = booked.find((b) => b.headers['x-callgate-operation-id'] === lookup[1]);
        return found ? reply(200, { status: 'committed', result: found.result }) : reply(404, {});
      }
      const key = String(req.headers['idempotency-key'] ?? '');
      if (req.method !== 'POST' || key === '') return reply(400, { error: 'bad request' });
      const seen = byKey.get(key);
      if (seen) return reply(200, seen.result);
      const args = JSON.parse(body || '{}') as Record<string, unknown>;
      const entry: Booked = {
        operation: (req.url ?? '/').slice(1),
        headers: req.headers,
        args,
        result: { appointment_id: `apt_${booked.length + 1}` },
      };
      booked.push(entry);
      byKey.set(key, entry);
      reply(200, entry.result);
    });
  });
  return { server, booked };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.PORT ?? 8095);
  clinicService().server.listen(port, '127.0.0.1', () =>
    process.stdout.write(`clinic appointment book on http://127.0.0.1:${port}\n`),
  );
}
