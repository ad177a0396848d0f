/**
 * The address every chaos process has for "the Redis primary": a TCP proxy on loopback that the
 * run points at whichever redis-server is primary now. Repointing cuts every open connection, as a
 * failover behind a virtual IP or a Sentinel-aware proxy does, so clients reconnect to the new one.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private targetPort: number;
  private refusing = false;

  private constructor(targetPort: number) {
    this.targetPort = targetPort;
    this.server = createServer((client) => this.accept(client));
  }

  static async start(targetPort: number): Promise<{ proxy: TcpProxy; port: number }> {
    const proxy = new TcpProxy(targetPort);
    const port = await new Promise<number>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => {
        const address = proxy.server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
    return { proxy, port };
  }

  /** Points new connections at `port` and cuts the open ones. */
  repoint(port: number): void {
    this.targetPort = port;
    this.cutAll();
  }

  /** While on: open connections are cut and new ones closed at once (this client cut off from Redis). */
  refuse(on: boolean): void {
    this.refusing = on;
    if (on) this.cutAll();
  }

  cutAll(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(this.targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
