/**
 * The native RTP sockets (gateway/media/native/rtp_udp.c through native-rtp-sockets.ts) against
 * real UDP on loopback: what arrives at which socket, with which bytes and source, in which
 * order; what goes out on send(); and that hostile arguments to the binding neither crash the
 * process nor close a descriptor the module did not open. The module must be built
 * (`npm run build:native`, done by scripts/bootstrap.sh): without it this file fails.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { closeSync, fstatSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { DatagramHandler, NativeRtpSocket } from '../../../gateway/media/native-rtp-socket.ts';
import {
  NativeRtpSockets,
  nativeRtpSockets,
  rtpSocketsEngine,
} from '../../../gateway/media/native-rtp-sockets.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { UdpPortPair } from '../../../gateway/media/udp-port-pair.ts';
import { sleep, waitFor } from './rtp-peer.ts';

/** Host names looked up by the gateway's sources (udp-port-pair.ts), passed on to the real resolver. */
const lookups = vi.hoisted(() => ({ hostnames: [] as string[] }));
vi.mock('node:dns', async (importOriginal) => {
  const dns = await importOriginal<typeof import('node:dns')>();
  const lookup = (hostname: string, ...rest: unknown[]): void => {
    lookups.hostnames.push(hostname);
    (dns.lookup as (hostname: string, ...rest: unknown[]) => void)(hostname, ...rest);
  };
  return { ...dns, lookup, default: { ...dns, lookup } };
});

/**
 * A port range per test file run, apart from the other media tests' ranges (30000-38037,
 * 42000-52007) and the media bench's (52000-55999): 38100-41819 with the UdpPortPair's ports.
 */
const PORT_BASE = 38100 + 2 * ((process.pid * 59) % 1700);
const PORT_SPAN = 300;
const MODULE_PATH = fileURLToPath(
  new URL('../../../gateway/media/native/build/Release/rtp_udp.node', import.meta.url),
);

interface RawBinding {
  start(onBatch: (data: Buffer, count: number) => void, meta: Int32Array): void;
  /** [fd, generation] */
  open(ipv6: unknown, address: unknown, port: unknown): [number, number];
  setRemote(fd: unknown, address?: unknown, port?: unknown): boolean;
  send(fd: unknown, data?: unknown, more?: unknown): number;
  close(fd?: unknown): void;
  readonly META_INTS: number;
  readonly SLOT_BYTES: number;
}

const loaded = nativeRtpSockets();
// Not built is a failure here, not a skip: CI builds the module before the tests.
if (loaded instanceof Error) throw loaded;
const native: NativeRtpSockets = loaded;
/** Bytes kept of one received datagram (2,048 in rtp_udp.c). */
const SLOT_BYTES = rawBinding().SLOT_BYTES;

interface Arrival {
  readonly data: Buffer;
  /** Copied when it arrived: the module reuses one RemoteInfo per socket while the source is unchanged. */
  readonly from: RemoteInfo;
}

interface OpenNative {
  readonly socket: NativeRtpSocket;
  readonly port: number;
  readonly got: Arrival[];
}

const cleanups: Array<() => Promise<void> | void> = [];
let nextPort = 0;

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function candidatePort(): number {
  const port = PORT_BASE + (nextPort % PORT_SPAN);
  nextPort++;
  return port;
}

/** `size` consecutive ports of this file's range, for a child process that opens many sockets. */
function portBlock(size: number): { first: number; last: number } {
  if ((nextPort % PORT_SPAN) + size > PORT_SPAN) nextPort += PORT_SPAN - (nextPort % PORT_SPAN);
  const first = candidatePort();
  nextPort += size - 1;
  return { first, last: first + size - 1 };
}

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SOCKETS_MODULE = fileURLToPath(
  new URL('../../../gateway/media/native-rtp-sockets.ts', import.meta.url),
);

/** Runs `script` in a process of its own (an ES module through tsx when `tsx`, else CommonJS), under `sh -c` prefix `shell` if given. */
function runScript(
  script: string,
  { tsx = false, shell }: { tsx?: boolean; shell?: string } = {},
): SpawnSyncReturns<string> {
  const args = tsx ? ['--import', 'tsx', '--input-type=module', '-e', script] : ['-e', script];
  const [command, argv] =
    shell === undefined
      ? [process.execPath, args]
      : ['sh', ['-c', `${shell} && exec "$0" "$@"`, process.execPath, ...args]];
  return spawnSync(command, argv, { encoding: 'utf8', timeout: 10_000, cwd: REPO_ROOT });
}

/** Script text: `open(handler)` through NativeRtpSockets on the next free port of `block`, returning { socket, port }. */
function openInScript(block: { first: number; last: number }): string {
  return `
      let nextPort = ${block.first};
      const open = (handler) => {
        for (;;) {
          const port = nextPort++;
          try { return { socket: native.open('127.0.0.1', port, handler), port }; } catch (e) { if (e.code !== 'EADDRINUSE' || port >= ${block.last}) throw e; }
        }
      };`;
}

/** Script text: `openRaw()` through the raw binding `b` on the next free port of `block`, returning { fd, port }. */
function openRawInScript(block: { first: number; last: number }): string {
  return `
      let nextPort = ${block.first};
      const openRaw = () => {
        for (;;) {
          const port = nextPort++;
          try { return { fd: b.open(false, '127.0.0.1', port)[0], port }; } catch (e) { if (e.code !== 'EADDRINUSE' || port >= ${block.last}) throw e; }
        }
      };`;
}

/** A native socket on the next free port of this file's range, recording what arrives (or calling `onMessage`). */
function openNative(
  address: string,
  onMessage?: (arrival: Arrival, socket: OpenNative) => void,
): OpenNative {
  for (let attempt = 0; ; attempt++) {
    const port = candidatePort();
    const got: Arrival[] = [];
    let opened: OpenNative | undefined;
    const handler: DatagramHandler = (data, from) => {
      const arrival = { data, from: { ...from } };
      got.push(arrival);
      if (onMessage !== undefined && opened !== undefined) onMessage(arrival, opened);
    };
    try {
      const socket = native.open(address, port, handler);
      opened = { socket, port, got };
      cleanups.push(() => socket.close());
      return opened;
    } catch (error) {
      // Another process holds it: take the next one, as UdpPortPair does.
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 50) throw error;
    }
  }
}

interface OpenDgram {
  readonly socket: Socket;
  readonly port: number;
  readonly got: Arrival[];
}

async function openDgram(type: 'udp4' | 'udp6', address: string, port = 0): Promise<OpenDgram> {
  const socket = createSocket(type);
  const got: Arrival[] = [];
  socket.on('message', (data, from) => got.push({ data, from: { ...from } }));
  cleanups.push(() => closeDgram(socket));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ port, address, exclusive: true }, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  return { socket, port: socket.address().port, got };
}

function closeDgram(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    try {
      socket.close(() => resolve());
    } catch {
      // Closed by the test already.
      resolve();
    }
  });
}

/** Distinct bytes per datagram: an index in the first four bytes, then a pattern derived from it. */
function datagram(index: number, length: number): Buffer {
  const data = Buffer.alloc(length);
  for (let i = 0; i < length; i++) data[i] = (index * 31 + i * 7) & 0xff;
  if (length >= 4) data.writeUInt32BE(index, 0);
  return data;
}

function rawBinding(): RawBinding {
  // The same per-process instance nativeRtpSockets() loaded and started (require caches it).
  return createRequire(import.meta.url)(MODULE_PATH) as RawBinding;
}

function thrown(action: () => unknown): { name: string; code: unknown } {
  try {
    action();
  } catch (error) {
    return { name: (error as Error).constructor.name, code: (error as NodeJS.ErrnoException).code };
  }
  return { name: 'nothing thrown', code: undefined };
}

describe('when a dgram socket sends to a native socket', () => {
  it('should deliver the datagram to the socket bound on its port with identical bytes and the sender in RemoteInfo', async () => {
    const a = openNative('127.0.0.1');
    const b = openNative('127.0.0.1');
    const sender = await openDgram('udp4', '127.0.0.1');
    const payload = datagram(7, 172);
    const marker = Buffer.from('marker for b');
    sender.socket.send(payload, a.port, '127.0.0.1');
    sender.socket.send(marker, b.port, '127.0.0.1');
    await waitFor(() => a.got.length >= 1 && b.got.length >= 1, 1000);
    await sleep(20);
    expect(a.got.map((g) => g.data.toString('hex'))).toEqual([payload.toString('hex')]);
    expect(a.got[0]?.from).toEqual({
      address: '127.0.0.1',
      family: 'IPv4',
      port: sender.port,
      size: 172,
    });
    expect(b.got.map((g) => g.data.toString())).toEqual(['marker for b']);
    expect(b.got[0]?.from).toEqual({
      address: '127.0.0.1',
      family: 'IPv4',
      port: sender.port,
      size: marker.length,
    });
  });

  it('should deliver a burst to 50 sockets each datagram once, at its own socket, in the order sent', async () => {
    const SOCKETS = 50;
    // 600 datagrams: more than one batch holds (512), and more than one recvmmsg (8) per socket.
    const PER_SOCKET = 12;
    const sockets = Array.from({ length: SOCKETS }, () => openNative('127.0.0.1'));
    const senders = [await openDgram('udp4', '127.0.0.1'), await openDgram('udp4', '127.0.0.1')];
    const expected = sockets.map(() => [] as string[]);
    for (let round = 0; round < PER_SOCKET; round++) {
      sockets.forEach((target, s) => {
        const data = datagram(s * 1000 + round, 12 + ((s + round) % 150));
        // Per socket, one sender only, so the order sent is the order of one FIFO queue.
        senders[s % 2]?.socket.send(data, target.port, '127.0.0.1');
        expected[s]?.push(data.toString('hex'));
      });
    }
    const total = SOCKETS * PER_SOCKET;
    await waitFor(() => sockets.reduce((sum, s) => sum + s.got.length, 0) >= total, 1500);
    await sleep(20);
    sockets.forEach((socket, s) => {
      expect(
        socket.got.map((g) => g.data.toString('hex')),
        `socket ${s}`,
      ).toEqual(expected[s]);
      for (const arrival of socket.got) {
        expect(arrival.from).toEqual({
          address: '127.0.0.1',
          family: 'IPv4',
          port: senders[s % 2]?.port,
          size: arrival.data.length,
        });
      }
    });
    // Batched: datagrams share their batch's buffer, so there are fewer buffers than datagrams.
    const batches = new Set(sockets.flatMap((s) => s.got.map((g) => g.data.buffer)));
    expect(batches.size).toBeGreaterThanOrEqual(2);
    expect(batches.size).toBeLessThan(total / 4);
  });

  it('should keep the bytes of every datagram handed to a handler unchanged across later batches', async () => {
    const a = openNative('127.0.0.1');
    const sender = await openDgram('udp4', '127.0.0.1');
    const copies: string[] = [];
    let sent = 0;
    for (let round = 0; round < 25; round++) {
      for (let k = 0; k < 4; k++) {
        const data = datagram(sent, 20 + ((sent * 37) % 1400));
        copies.push(data.toString('hex'));
        sender.socket.send(data, a.port, '127.0.0.1');
        sent++;
      }
      // Each round its own batch, after the previous round's views were handed out.
      await waitFor(() => a.got.length >= sent, 1000);
    }
    const batches = new Set(a.got.map((g) => g.data.buffer));
    expect(batches.size).toBeGreaterThanOrEqual(25);
    expect(a.got.map((g) => g.data.toString('hex'))).toEqual(copies);
  });

  it('should hand over the first SLOT_BYTES of a longer datagram with its real size, and a zero-length one, then carry on', async () => {
    const a = openNative('127.0.0.1');
    const sender = await openDgram('udp4', '127.0.0.1');
    const long = datagram(1, SLOT_BYTES + 1952);
    const longest = datagram(2, 65507);
    const after = datagram(3, 100);
    for (const data of [long, Buffer.alloc(0), longest, after])
      sender.socket.send(data, a.port, '127.0.0.1');
    await waitFor(() => a.got.length >= 4, 1000);
    await sleep(20);
    expect(a.got.map((g) => [g.data.length, g.from.size])).toEqual([
      [SLOT_BYTES, SLOT_BYTES + 1952],
      [0, 0],
      [SLOT_BYTES, 65507],
      [100, 100],
    ]);
    expect(a.got[0]?.data.equals(long.subarray(0, SLOT_BYTES))).toBe(true);
    expect(a.got[2]?.data.equals(longest.subarray(0, SLOT_BYTES))).toBe(true);
    expect(a.got[3]?.data.equals(after)).toBe(true);
  });

  it('should deliver every long datagram of a burst that fills several batches by bytes, in order', async () => {
    // 8 sockets x 20 datagrams of more than SLOT_BYTES: a batch holds 128 slots' worth of bytes,
    // and 20 such datagrams stay well inside a socket's default receive buffer.
    const sockets = Array.from({ length: 8 }, () => openNative('127.0.0.1'));
    const sender = await openDgram('udp4', '127.0.0.1');
    const expected = sockets.map(() => [] as Array<[string, number]>);
    for (let round = 0; round < 20; round++) {
      sockets.forEach((target, s) => {
        const data = datagram(s * 100 + round, SLOT_BYTES + 52 + s * 10 + round);
        sender.socket.send(data, target.port, '127.0.0.1');
        expected[s]?.push([data.subarray(0, SLOT_BYTES).toString('hex'), data.length]);
      });
    }
    await waitFor(() => sockets.reduce((sum, s) => sum + s.got.length, 0) >= 160, 1500);
    await sleep(20);
    sockets.forEach((socket, s) => {
      expect(
        socket.got.map((g): [string, number] => [g.data.toString('hex'), g.from.size]),
        `socket ${s}`,
      ).toEqual(expected[s]);
    });
    expect(
      new Set(sockets.flatMap((s) => s.got.map((g) => g.data.buffer))).size,
    ).toBeGreaterThanOrEqual(2);
  });
});

describe('when a native socket sends', () => {
  it('should send a buffer, a header and payload pair, and a longer list each as one datagram from its own port', async () => {
    const a = openNative('127.0.0.1');
    const receiver = await openDgram('udp4', '127.0.0.1');
    const single = datagram(1, 172);
    const header = datagram(2, 12);
    const payload = datagram(3, 160);
    const parts = [datagram(4, 12), datagram(5, 4), datagram(6, 100)];
    const expected = [single, Buffer.concat([header, payload]), Buffer.concat(parts)].map((d) =>
      d.toString('hex'),
    );
    expect(a.socket.send(single, receiver.port, '127.0.0.1')).toBe(0);
    expect(a.socket.send([header, payload], receiver.port, '127.0.0.1')).toBe(0);
    expect(a.socket.send(parts, receiver.port, '127.0.0.1')).toBe(0);
    // Sent within send(): the caller may reuse its buffers at once.
    for (const buffer of [single, header, payload, ...parts]) buffer.fill(0);
    await waitFor(() => receiver.got.length >= 3, 1000);
    await sleep(20);
    expect(receiver.got.map((g) => g.data.toString('hex'))).toEqual(expected);
    expect(receiver.got.map((g) => g.from)).toEqual([
      { address: '127.0.0.1', family: 'IPv4', port: a.port, size: 172 },
      { address: '127.0.0.1', family: 'IPv4', port: a.port, size: 172 },
      { address: '127.0.0.1', family: 'IPv4', port: a.port, size: 116 },
    ]);
  });

  it('should send each datagram to the destination of its own call when the destination changes', async () => {
    const a = openNative('127.0.0.1');
    const first = await openDgram('udp4', '127.0.0.1');
    const second = await openDgram('udp4', '127.0.0.1');
    const plan = [first, second, second, first, second];
    plan.forEach((to, i) =>
      expect(a.socket.send(Buffer.from(`d${i}`), to.port, '127.0.0.1')).toBe(0),
    );
    await waitFor(() => first.got.length + second.got.length >= plan.length, 1000);
    await sleep(20);
    expect(first.got.map((g) => g.data.toString())).toEqual(['d0', 'd3']);
    expect(second.got.map((g) => g.data.toString())).toEqual(['d1', 'd2', 'd4']);
  });

  it('should return EINVAL for a destination that is not an IP literal of its family, and send nothing', async () => {
    const a = openNative('127.0.0.1');
    const receiver = await openDgram('udp4', '127.0.0.1');
    expect(a.socket.send(Buffer.from('named'), receiver.port, 'localhost')).toBe('EINVAL');
    expect(a.socket.send(Buffer.from('garbage'), receiver.port, 'not-an-ip')).toBe('EINVAL');
    expect(a.socket.send(Buffer.from('v6'), receiver.port, '::1')).toBe('EINVAL');
    expect(a.socket.send(Buffer.from('marker'), receiver.port, '127.0.0.1')).toBe(0);
    await waitFor(() => receiver.got.length >= 1, 1000);
    await sleep(20);
    expect(receiver.got.map((g) => g.data.toString())).toEqual(['marker']);
  });

  // C reads a string up to its first NUL: '127.0.0.1\0junk' must not pass for 127.0.0.1 (dgram refuses it).
  it('should return EINVAL for an IP literal followed by a NUL byte and text, and send nothing', async () => {
    const a = openNative('127.0.0.1');
    const receiver = await openDgram('udp4', '127.0.0.1');
    const refused = a.socket.send(Buffer.from('after NUL'), receiver.port, '127.0.0.1\u0000junk');
    a.socket.send(Buffer.from('marker'), receiver.port, '127.0.0.1');
    await waitFor(() => receiver.got.length >= 1, 1000);
    await sleep(20);
    expect({ refused, got: receiver.got.map((g) => g.data.toString()) }).toEqual({
      refused: 'EINVAL',
      got: ['marker'],
    });
  });

  it('should return EBADF after close without throwing', async () => {
    const a = openNative('127.0.0.1');
    const receiver = await openDgram('udp4', '127.0.0.1');
    a.socket.close();
    expect(a.socket.send(Buffer.from('late'), receiver.port, '127.0.0.1')).toBe('EBADF');
    expect(a.socket.send([Buffer.from('la'), Buffer.from('te')], receiver.port, '127.0.0.1')).toBe(
      'EBADF',
    );
    expect(() => a.socket.close()).not.toThrow();
    await sleep(30);
    expect(receiver.got).toEqual([]);
  });
});

describe('when opening and closing native sockets', () => {
  it('should throw EADDRINUSE for a port a dgram socket holds, and leave that socket receiving', async () => {
    const holder = await openDgram('udp4', '127.0.0.1');
    const sender = await openDgram('udp4', '127.0.0.1');
    const handler = vi.fn<DatagramHandler>();
    let error: unknown;
    try {
      native.open('127.0.0.1', holder.port, handler);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(Error);
    expect((error as NodeJS.ErrnoException).code).toBe('EADDRINUSE');
    sender.socket.send(Buffer.from('still mine'), holder.port, '127.0.0.1');
    await waitFor(() => holder.got.length >= 1, 1000);
    expect(holder.got.map((g) => g.data.toString())).toEqual(['still mine']);
    expect(handler).not.toHaveBeenCalled();
  });

  it('should throw EADDRINUSE for a port another native socket holds', () => {
    const a = openNative('127.0.0.1');
    expect(thrown(() => native.open('127.0.0.1', a.port, () => {}))).toEqual({
      name: 'Error',
      code: 'EADDRINUSE',
    });
  });

  it('should free the port on close, so dgram can bind it', async () => {
    const a = openNative('127.0.0.1');
    a.socket.close();
    const rebound = await openDgram('udp4', '127.0.0.1', a.port);
    expect(rebound.port).toBe(a.port);
  });

  it('should never call a closed socket handler again, even for datagrams read in the same batch', async () => {
    const c = openNative('127.0.0.1');
    const a = openNative('127.0.0.1', (_arrival, self) => self.socket.close());
    // Native sends go to the kernel within the call, so all three wait in one receive queue.
    for (const text of ['one', 'two', 'three'])
      expect(c.socket.send(Buffer.from(text), a.port, '127.0.0.1')).toBe(0);
    await waitFor(() => a.got.length >= 1, 1000);
    await sleep(30);
    for (const text of ['four', 'five']) c.socket.send(Buffer.from(text), a.port, '127.0.0.1');
    await sleep(30);
    expect(a.got.map((g) => g.data.toString())).toEqual(['one']);
  });

  // Datagrams are found their socket by descriptor when the batch is dispatched: a socket opened
  // during the batch takes the descriptor of the one closed during it, and must not get its datagrams.
  it('should not hand datagrams read for a socket closed during a batch to a socket opened during it', async () => {
    const c = openNative('127.0.0.1');
    let b: OpenNative | undefined;
    const a = openNative('127.0.0.1', (_arrival, self) => {
      if (b !== undefined) return;
      self.socket.close();
      // The lowest free descriptor: the one just closed.
      b = openNative('127.0.0.1');
    });
    for (const text of ['one', 'two', 'three'])
      c.socket.send(Buffer.from(text), a.port, '127.0.0.1');
    await waitFor(() => b !== undefined, 1000);
    await sleep(30);
    expect({
      toA: a.got.map((g) => g.data.toString()),
      toB: b?.got.map((g) => g.data.toString()),
    }).toEqual({ toA: ['one'], toB: [] });
  });
});

// A batch fills during one socket's datagrams (64 sockets of 8 datagrams ahead of it make 512, one
// batch): the batch is handed over after the first three of them, and the rest is read after a handler
// may have closed the socket and something else taken its descriptor number.
describe("when a batch fills in the middle of a socket's queue and a handler closes that socket", () => {
  /** 63 sockets with 8 datagrams each and one with 5 ahead of `target` (ready before it): 509 datagrams. */
  function fillAhead(sender: OpenNative): void {
    for (let i = 0; i < 64; i++) {
      const filler = openNative('127.0.0.1');
      for (let k = 0; k < (i < 63 ? 8 : 5); k++)
        expect(sender.socket.send(Buffer.from(`filler ${i}.${k}`), filler.port, '127.0.0.1')).toBe(
          0,
        );
    }
  }

  it('should not give the rest of the read to a native socket opened on the same descriptor', async () => {
    const sender = openNative('127.0.0.1');
    fillAhead(sender);
    let opened: OpenNative | undefined;
    const closedOn: string[] = [];
    const x = openNative('127.0.0.1', (arrival, self) => {
      if (opened !== undefined) return;
      closedOn.push(arrival.data.toString());
      self.socket.close();
      opened = openNative('127.0.0.1');
    });
    for (let k = 0; k < 8; k++) sender.socket.send(Buffer.from(`to x #${k}`), x.port, '127.0.0.1');
    await waitFor(() => opened !== undefined, 1000);
    await sleep(50);
    // The first three of x's read fill the batch; x closes on the first; the other five are dropped.
    expect(closedOn).toEqual(['to x #0']);
    expect(opened?.socket.fd).toBe(x.socket.fd);
    expect(x.got.map((g) => g.data.toString())).toEqual(['to x #0']);
    expect(opened?.got).toEqual([]);
  });

  it('should not read a descriptor that another socket of the process took in the meantime', async () => {
    const sender = openNative('127.0.0.1');
    fillAhead(sender);
    const x = openNative('127.0.0.1');
    const otherGot: string[] = [];
    let other: Socket | undefined;
    const otherPort = candidatePort();
    const a = openNative('127.0.0.1', () => {
      if (other !== undefined) return;
      x.socket.close();
      // A dgram socket bound now (an IP literal resolves at once) takes the lowest free
      // descriptor, x's, while the batch's read of the ready sockets is still going on.
      const socket = createSocket({
        type: 'udp4',
        lookup: (host, _options, callback) => callback(null, host, 4),
      });
      other = socket;
      socket.on('message', (data) => otherGot.push(data.toString()));
      cleanups.push(() => closeDgram(socket));
      socket.bind(otherPort, '127.0.0.1');
      sender.socket.send(Buffer.from('sent during the batch'), otherPort, '127.0.0.1');
    });
    for (let k = 0; k < 8; k++) sender.socket.send(Buffer.from(`to a #${k}`), a.port, '127.0.0.1');
    for (let k = 0; k < 2; k++) sender.socket.send(Buffer.from(`to x #${k}`), x.port, '127.0.0.1');
    await waitFor(() => other !== undefined, 1000);
    await sleep(50);
    sender.socket.send(Buffer.from('sent after the batch'), otherPort, '127.0.0.1');
    await waitFor(() => otherGot.length >= 2, 1000).catch(() => undefined);
    expect(otherGot).toEqual(['sent during the batch', 'sent after the batch']);
    expect(a.got).toHaveLength(8);
  });
});

describe('when a worker thread that used the module ends', () => {
  // Its sockets and the loop handle are closed before Node unloads the module: a handle closed
  // later would call into unmapped code (a segmentation fault of the whole process).
  it.each([
    ['closes its socket and ends', 'setTimeout(() => b.close(fd), 20);'],
    ['calls process.exit with a socket open', 'setTimeout(() => process.exit(0), 20);'],
    ['is terminated with a socket open', ''],
  ])('should end cleanly, its port free again, when it %s', (how, ending) => {
    const firstPort = candidatePort();
    const workerCode = [
      `const b = require(${JSON.stringify(MODULE_PATH)});`,
      'b.start(() => {}, new Int32Array(b.META_INTS * b.BATCH_DATAGRAMS));',
      'let fd = -1;',
      'let port = 0;',
      `for (let p = ${firstPort}; fd < 0; p++) {`,
      "  try { [fd] = b.open(false, '127.0.0.1', p); port = p; } catch (e) { if (e.code !== 'EADDRINUSE' || p > " +
        String(firstPort + 50) +
        ') throw e; }',
      '}',
      "b.setRemote(fd, '127.0.0.1', 9);",
      "b.send(fd, Buffer.from('x'));",
      "require('node:worker_threads').parentPort.postMessage(port);",
      ending,
    ].join('\n');
    const terminate = ending === '' ? 'setTimeout(() => worker.terminate(), 20);' : '';
    // The main thread goes on after the worker and binds the worker's port: free only if the
    // worker's socket was closed with it.
    const script = [
      "const { Worker } = require('node:worker_threads');",
      "const dgram = require('node:dgram');",
      'let port = 0;',
      `const worker = new Worker(${JSON.stringify(workerCode)}, { eval: true });`,
      `worker.on('message', (p) => { port = p; ${terminate} });`,
      "worker.on('exit', (code) => {",
      "  console.log('worker ended ' + code);",
      "  const socket = dgram.createSocket('udp4');",
      "  socket.on('error', (e) => { console.log('port ' + e.code); socket.close(); });",
      "  socket.bind(port, '127.0.0.1', () => { console.log('port free'); socket.close(); });",
      '});',
    ].join('\n');
    const result = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    expect({ how, status: result.status, signal: result.signal, stderr: result.stderr }).toEqual({
      how,
      status: 0,
      signal: null,
      stderr: '',
    });
    expect(result.stdout).toMatch(/^worker ended \d+\nport free\n$/);
  });
});

describe("when one socket's handler throws during a batch", () => {
  // In a process of its own: the error must reach uncaughtException, which the test process keeps.
  it('should still hand the other sockets their datagrams of that batch, then raise the error once', () => {
    const firstPort = candidatePort();
    const script = `
      import { nativeRtpSockets } from ${JSON.stringify(fileURLToPath(new URL('../../../gateway/media/native-rtp-sockets.ts', import.meta.url)))};
      const native = nativeRtpSockets();
      if (native instanceof Error) throw native;
      const open = (handler) => {
        for (let port = ${firstPort}; ; port++) {
          try { return { socket: native.open('127.0.0.1', port, handler), port }; } catch (e) { if (e.code !== 'EADDRINUSE' || port > ${firstPort + 50}) throw e; }
        }
      };
      const got = { a: [], b: [] };
      const errors = [];
      process.on('uncaughtException', (error) => errors.push(error.message));
      const a = open((data) => { got.a.push(data.toString()); if (data.toString() === 'a1') throw new Error('handler of a'); });
      const b = open((data) => got.b.push(data.toString()));
      const sender = open(() => {});
      for (const text of ['a0', 'a1', 'a2']) sender.socket.send(Buffer.from(text), a.port, '127.0.0.1');
      for (const text of ['b0', 'b1', 'b2']) sender.socket.send(Buffer.from(text), b.port, '127.0.0.1');
      setTimeout(() => {
        console.log(JSON.stringify({ got, errors }));
        for (const s of [a, b, sender]) s.socket.close();
      }, 200);
    `;
    const result = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      {
        encoding: 'utf8',
        timeout: 10_000,
        cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      },
    );
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual({
      got: { a: ['a0', 'a1', 'a2'], b: ['b0', 'b1', 'b2'] },
      errors: ['handler of a'],
    });
  });

  // The batch fills after a's third datagram while a has eight waiting: a read never takes more
  // from the kernel than the batch has room for, so what the throw leaves is read next time.
  it("should deliver every datagram sent, when the batch that throws fills in the middle of a socket's queue", () => {
    const script = `
      import { nativeRtpSockets } from ${JSON.stringify(SOCKETS_MODULE)};
      const native = nativeRtpSockets();
      if (native instanceof Error) throw native;
      ${openInScript(portBlock(80))}
      const errors = [];
      process.on('uncaughtException', (error) => errors.push(error.message));
      const sender = open(() => {});
      let fillers = 0;
      // 63 sockets with 8 datagrams and one with 5 ahead of a: 509 of the batch's 512.
      const sockets = [sender];
      for (let i = 0; i < 64; i++) {
        const filler = open(() => fillers++);
        sockets.push(filler);
        for (let k = 0; k < (i < 63 ? 8 : 5); k++) sender.socket.send(Buffer.from('filler'), filler.port, '127.0.0.1');
      }
      const got = [];
      const a = open((data) => { got.push(data.toString()); if (data.toString() === 'a0') throw new Error('handler of a'); });
      sockets.push(a);
      for (let k = 0; k < 8; k++) sender.socket.send(Buffer.from('a' + k), a.port, '127.0.0.1');
      setTimeout(() => {
        console.log(JSON.stringify({ fillers, got, errors }));
        for (const s of sockets) s.socket.close();
      }, 300);
    `;
    const result = runScript(script, { tsx: true });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual({
      fillers: 509,
      got: ['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7'],
      errors: ['handler of a'],
    });
  });
});

describe('when the meta array is detached after start()', () => {
  it('should deliver nothing more, raise ERR_INVALID_STATE once, and not spin on the sockets still readable', () => {
    const script = `
      const b = require(${JSON.stringify(MODULE_PATH)});
      ${openRawInScript(portBlock(20))}
      const meta = new Int32Array(b.META_INTS * b.BATCH_DATAGRAMS);
      let datagrams = 0;
      const errors = [];
      process.on('uncaughtException', (error) => errors.push(error.code));
      b.start((data, count) => { datagrams += count; }, meta);
      const r = openRaw();
      const tx = openRaw();
      b.setRemote(tx.fd, '127.0.0.1', r.port);
      b.send(tx.fd, Buffer.from('before'));
      setTimeout(() => {
        const before = datagrams;
        // Detached and its memory freed: the module must not write where it was.
        structuredClone(meta.buffer, { transfer: [meta.buffer] });
        globalThis.gc();
        for (let k = 0; k < 5; k++) b.send(tx.fd, Buffer.from('after ' + k));
        setTimeout(() => {
          for (let k = 0; k < 5; k++) b.send(tx.fd, Buffer.from('later ' + k));
          const cpu = process.cpuUsage();
          const start = performance.now();
          setTimeout(() => {
            const used = process.cpuUsage(cpu);
            const busy = (used.user + used.system) / 1000 / (performance.now() - start);
            console.log(JSON.stringify({ before, after: datagrams - before, errors, spinning: busy > 0.5 }));
            b.close(r.fd);
            b.close(tx.fd);
          }, 200);
        }, 100);
      }, 100);
    `;
    const result = spawnSync(process.execPath, ['--expose-gc', '-e', script], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    expect({ status: result.status, signal: result.signal, stderr: result.stderr }).toEqual({
      status: 0,
      signal: null,
      stderr: '',
    });
    expect(JSON.parse(result.stdout)).toEqual({
      before: 1,
      after: 0,
      errors: ['ERR_INVALID_STATE'],
      spinning: false,
    });
  });
});

describe('when start() is given meta on a buffer that can change size', () => {
  it('should refuse a resizable ArrayBuffer and a growable SharedArrayBuffer, and start on a fixed one after', () => {
    const script = `
      const b = require(${JSON.stringify(MODULE_PATH)});
      const n = b.META_INTS * b.BATCH_DATAGRAMS;
      const attempt = (meta) => { try { b.start(() => {}, meta); return 'started'; } catch (e) { return e.name + ' ' + e.code; } };
      console.log(JSON.stringify([
        attempt(new Int32Array(new ArrayBuffer(4 * n, { maxByteLength: 8 * n }))),
        attempt(new Int32Array(new SharedArrayBuffer(4 * n, { maxByteLength: 8 * n }))),
        attempt(new Int32Array(n)),
      ]));
    `;
    const result = runScript(script);
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual([
      'TypeError ERR_INVALID_ARG_TYPE',
      'TypeError ERR_INVALID_ARG_TYPE',
      'started',
    ]);
  });
});

describe('when the process is out of descriptors as the native sockets start', () => {
  it('should fall back to dgram for auto with the reason, and start the native sockets on a later call once descriptors are free', () => {
    const block = portBlock(10);
    const script = `
      import { closeSync, openSync } from 'node:fs';
      import { chooseRtpSockets } from ${JSON.stringify(SOCKETS_MODULE)};
      import { loadNativeBinding } from ${JSON.stringify(fileURLToPath(new URL('../../../gateway/media/native-rtp-binding.ts', import.meta.url)))};
      // Loaded while descriptors remain: only its start() meets EMFILE.
      loadNativeBinding();
      const held = [];
      try { for (;;) held.push(openSync('/dev/null', 'r')); } catch {}
      const first = chooseRtpSockets('auto');
      for (const fd of held) closeSync(fd);
      const second = chooseRtpSockets('auto');
      const native = second.native;
      ${openInScript(block)}
      const got = [];
      const a = open((data) => got.push(data.toString()));
      a.socket.send(Buffer.from('to myself'), a.port, '127.0.0.1');
      setTimeout(() => {
        console.log(JSON.stringify({ first, second: second.engine, got }));
        a.socket.close();
      }, 100);
    `;
    const result = runScript(script, { tsx: true, shell: 'ulimit -n 256' });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual({
      first: {
        engine: 'node',
        fallbackReason: 'start() failed (EMFILE): epoll_create1: Too many open files',
      },
      second: 'native',
      got: ['to myself'],
    });
  });
});

describe('when the sockets are IPv6', () => {
  it('should receive from a udp6 socket on ::1 with an IPv6 RemoteInfo, and send back to it', async () => {
    const a = openNative('::1');
    const peer = await openDgram('udp6', '::1');
    const inbound = datagram(1, 80);
    const outbound = datagram(2, 90);
    peer.socket.send(inbound, a.port, '::1');
    await waitFor(() => a.got.length >= 1, 1000);
    expect(a.socket.send(outbound, peer.port, '::1')).toBe(0);
    await waitFor(() => peer.got.length >= 1, 1000);
    await sleep(20);
    expect(a.got.map((g) => g.data.toString('hex'))).toEqual([inbound.toString('hex')]);
    expect(a.got[0]?.from).toEqual({ address: '::1', family: 'IPv6', port: peer.port, size: 80 });
    expect(peer.got.map((g) => g.data.toString('hex'))).toEqual([outbound.toString('hex')]);
    expect(peer.got[0]?.from).toEqual({ address: '::1', family: 'IPv6', port: a.port, size: 90 });
  });

  it('should receive from and send to IPv4 on a dual-stack socket, naming the source as dgram does', async (context) => {
    let probe: OpenDgram;
    try {
      probe = await openDgram('udp6', '::ffff:127.0.0.1');
    } catch {
      // IPv6 sockets are IPv6-only on this host (net.ipv6.bindv6only=1): nothing to test.
      context.skip();
      return;
    }
    const a = openNative('::ffff:127.0.0.1');
    const peer = await openDgram('udp4', '127.0.0.1');
    peer.socket.send(Buffer.from('to native'), a.port, '127.0.0.1');
    peer.socket.send(Buffer.from('to dgram'), probe.port, '127.0.0.1');
    await waitFor(() => a.got.length >= 1 && probe.got.length >= 1, 1000);
    expect(a.got[0]?.from).toEqual({ ...probe.got[0]?.from, size: 9 });
    expect(a.got[0]?.from).toEqual({
      address: '::ffff:127.0.0.1',
      family: 'IPv6',
      port: peer.port,
      size: 9,
    });
    // An IPv4 destination is sent to as ::ffff:a.b.c.d, as dgram does on a udp6 socket.
    expect(a.socket.send(Buffer.from('back'), peer.port, '127.0.0.1')).toBe(0);
    await waitFor(() => peer.got.length >= 1, 1000);
    expect(peer.got.map((g) => [g.data.toString(), g.from])).toEqual([
      ['back', { address: '127.0.0.1', family: 'IPv4', port: a.port, size: 4 }],
    ]);
  });
});

describe('when the binding is given hostile arguments', () => {
  it('should refuse to start a second time', () => {
    const binding = rawBinding();
    expect(thrown(() => binding.start(() => {}, new Int32Array(binding.META_INTS * 4)))).toEqual({
      name: 'Error',
      code: 'ERR_ALREADY_STARTED',
    });
  });

  it('should throw EINVAL for a listen address that is not an IP literal of the socket family', () => {
    const binding = rawBinding();
    const port = candidatePort();
    expect(thrown(() => binding.open(true, 'not-an-ip', port))).toEqual({
      name: 'Error',
      code: 'EINVAL',
    });
    expect(thrown(() => binding.open(false, 'not-an-ip', port))).toEqual({
      name: 'Error',
      code: 'EINVAL',
    });
    expect(thrown(() => binding.open(false, '::1', port))).toEqual({
      name: 'Error',
      code: 'EINVAL',
    });
    expect(thrown(() => native.open('localhost', port, () => {}))).toEqual({
      name: 'Error',
      code: 'EINVAL',
    });
    expect(thrown(() => native.open('::zz', port, () => {}))).toEqual({
      name: 'Error',
      code: 'EINVAL',
    });
  });

  it('should throw a TypeError for ports out of range and arguments of the wrong type', () => {
    const binding = rawBinding();
    for (const args of [
      [false, '127.0.0.1', 70000],
      [false, '127.0.0.1', -1],
      [false, '127.0.0.1', '5004'],
      ['yes', '127.0.0.1', candidatePort()],
      [false, 127001, candidatePort()],
      [false, '127.0.0.1'],
    ]) {
      expect(
        thrown(() => binding.open(...(args as [unknown, unknown, unknown]))),
        JSON.stringify(args),
      ).toEqual({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    }
    expect(thrown(() => native.open('127.0.0.1', 70000, () => {}))).toEqual({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
    });
  });

  it('should refuse descriptors it did not open, without closing them', () => {
    const binding = rawBinding();
    const file = openSync(fileURLToPath(import.meta.url), 'r');
    try {
      for (const fd of [0, 1, 2, file]) {
        expect(
          thrown(() => binding.close(fd)),
          `close(${fd})`,
        ).toEqual({ name: 'Error', code: 'EBADF' });
        expect(
          thrown(() => binding.setRemote(fd, '127.0.0.1', 9)),
          `setRemote(${fd})`,
        ).toEqual({ name: 'Error', code: 'EBADF' });
        expect(binding.send(fd, Buffer.from('x')), `send(${fd})`).toBe(-9);
      }
      expect(thrown(() => binding.setRemote(999999, '127.0.0.1', 9))).toEqual({
        name: 'Error',
        code: 'EBADF',
      });
      expect(binding.send(999999, Buffer.from('x'))).toBe(-9);
      for (const bad of [-1, 'x', undefined, {}]) {
        expect(
          thrown(() => binding.close(bad)),
          `close(${JSON.stringify(bad)})`,
        ).toEqual({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
      }
      expect(thrown(() => binding.send(-1, Buffer.from('x')))).toEqual({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_TYPE',
      });
      for (const fd of [0, 1, 2, file])
        expect(() => fstatSync(fd), `fd ${fd} still open`).not.toThrow();
    } finally {
      closeSync(file);
    }
  });

  // Unreachable through NativeRtpSocket, which always passes them all.
  it('should throw a TypeError when arguments are missing', () => {
    const binding = rawBinding();
    expect({
      close: thrown(() => binding.close()),
      setRemote: thrown(() => binding.setRemote(0, '127.0.0.1')),
      send: thrown(() => binding.send(0)),
    }).toEqual({
      close: { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' },
      setRemote: { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' },
      send: { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' },
    });
  });

  it('should refuse a descriptor it closed once another file has taken its number', () => {
    const binding = rawBinding();
    const a = openNative('127.0.0.1');
    const fd = a.socket.fd;
    a.socket.close();
    const file = openSync(fileURLToPath(import.meta.url), 'r');
    try {
      // The lowest free descriptor, so normally the socket's old number.
      expect(file).toBe(fd);
      expect(thrown(() => binding.close(fd))).toEqual({ name: 'Error', code: 'EBADF' });
      expect(thrown(() => binding.setRemote(fd, '127.0.0.1', 9))).toEqual({
        name: 'Error',
        code: 'EBADF',
      });
      expect(binding.send(fd, Buffer.from('x'))).toBe(-9);
      expect(fstatSync(file).isFile()).toBe(true);
    } finally {
      closeSync(file);
    }
  });

  it('should throw a TypeError for send data that is not a buffer, and report a socket with no destination', () => {
    const binding = rawBinding();
    let fd = -1;
    for (let attempt = 0; fd < 0 && attempt < 50; attempt++) {
      try {
        [fd] = binding.open(false, '127.0.0.1', candidatePort());
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      }
    }
    expect(fd).toBeGreaterThanOrEqual(0);
    try {
      for (const data of ['text', 5, undefined, null, [Buffer.from('x')]]) {
        expect(
          thrown(() => binding.send(fd, data)),
          `send(${JSON.stringify(data)})`,
        ).toEqual({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
      }
      expect(thrown(() => binding.send(fd, Buffer.from('x'), 'more'))).toEqual({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_TYPE',
      });
      // EDESTADDRREQ: no setRemote yet.
      expect(binding.send(fd, Buffer.from('x'))).toBe(-89);
      expect(binding.setRemote(fd, 'not-an-ip', 9)).toBe(false);
      expect(binding.setRemote(fd, '::1', 9)).toBe(false);
      expect(thrown(() => binding.setRemote(fd, '127.0.0.1', 70000))).toEqual({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_TYPE',
      });
      expect(binding.send(fd, Buffer.from('x'))).toBe(-89);
    } finally {
      binding.close(fd);
    }
    expect(thrown(() => binding.close(fd))).toEqual({ name: 'Error', code: 'EBADF' });
  });
});

describe('when choosing the RTP sockets engine', () => {
  it('should give dgram for node and the native module for auto and native when it is built', () => {
    expect(rtpSocketsEngine('node')).toBeUndefined();
    expect(rtpSocketsEngine('auto')).toBe(native);
    expect(rtpSocketsEngine('native')).toBe(native);
    expect(native).toBeInstanceOf(NativeRtpSockets);
  });

  it('should give every loader of the same binding the one started instance (a second copy of the module code must not start it again)', () => {
    expect(nativeRtpSockets(() => rawBinding() as never)).toBe(native);
    expect(nativeRtpSockets()).toBe(native);
  });
});

describe('when a UdpPortPair on native sockets sends to a host name', () => {
  it('should look the name up once and send the later packets to its address', async () => {
    const receiver = await openDgram('udp4', '127.0.0.1');
    // The same port on ::1: a packet for localhost must not land there (the pair is IPv4).
    const elsewhere = await openDgram('udp6', '::1', receiver.port);
    const errors: Error[] = [];
    const rtpPortMin = PORT_BASE + PORT_SPAN;
    const pair = await UdpPortPair.bind({
      allocator: new RtpPortAllocator({ portMin: rtpPortMin, portMax: rtpPortMin + 19 }),
      address: '127.0.0.1',
      onRtp: () => {},
      onRtcp: () => {},
      onError: (error) => errors.push(error),
      maxUnsentPackets: 8,
      native,
    });
    cleanups.push(() => pair.close());
    lookups.hostnames.length = 0;
    const to = { address: 'localhost', port: receiver.port };
    let sent = 0;
    const deadline = performance.now() + 1000;
    // Until ten arrived: the first ones are dropped while the name is looked up. Three at a
    // time, so some are sent while the lookup is under way.
    while (receiver.got.length < 10 && performance.now() < deadline) {
      for (let k = 0; k < 3; k++) {
        const packet = pair.rtpPacketBuffer(8, to);
        packet.writeUInt32BE(sent, 0);
        packet.writeUInt32BE(0xc0ffee, 4);
        pair.sendRtp(packet, to);
        sent++;
      }
      await sleep(2);
    }
    await sleep(20);
    const arrived = receiver.got.map((g) => g.data.readUInt32BE(0));
    const first = arrived[0] ?? sent;
    expect(arrived.length).toBeGreaterThanOrEqual(10);
    // Once the name is known nothing is dropped: every packet from the first that arrived on.
    expect(arrived).toEqual(Array.from({ length: sent - first }, (_, i) => first + i));
    expect(
      receiver.got.every(
        (g) =>
          g.from.port === pair.port &&
          g.from.address === '127.0.0.1' &&
          g.data.readUInt32BE(4) === 0xc0ffee,
      ),
    ).toBe(true);
    expect(elsewhere.got).toEqual([]);
    expect(lookups.hostnames.filter((name) => name === 'localhost')).toEqual(['localhost']);
    expect(errors).toEqual([]);
  });
});
