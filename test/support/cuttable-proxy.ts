/**
 * A TCP proxy on loopback in front of a server (Redis, for tests of network cuts): `cut()` holds
 * every byte in both directions, as a partition would, without closing a connection; `heal()`
 * lets what was held through, in order, and traffic flow again.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private readonly held: { to: Socket; chunk: Buffer }[] = [];
  private isCut = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<CuttableProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
    const proxy = new CuttableProxy(server, address.port);
    server.on('connection', (client: Socket) =>
      proxy.join(client, connect(target.port, target.host)),
    );
    return proxy;
  }

  /** A Redis URL through this proxy for `url` (same database, other port). */
  redisUrl(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  cut(): void {
    this.isCut = true;
  }

  heal(): void {
    this.isCut = false;
    for (const { to, chunk } of this.held.splice(0)) if (!to.destroyed) to.write(chunk);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private join(client: Socket, upstream: Socket): void {
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.on('data', (chunk: Buffer) => {
        if (this.isCut) this.held.push({ to, chunk });
        else to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}
