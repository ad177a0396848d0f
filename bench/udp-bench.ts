/**
 * The CPU one UDP datagram costs on callgate's two RTP socket engines (rtp.sockets): Node's dgram
 * and callgate's native module. Each engine in turn, in a process of its own:
 *
 * - receive: 100 sockets on loopback take a flood from a sender process (1,000 datagrams of 172
 *   bytes, the size of a PCMU packet, every 10 ms, spread over the sockets);
 * - send: 100 sockets send 200,000 such datagrams to a sink process, yielding to the loop every 500.
 *
 * Printed: user and system CPU per datagram of the measuring process (the kernel's loopback
 * delivery is charged to the sender). The sender and sink are dgram in both cases.
 *
 *   npx tsx bench/udp-bench.ts [--engines node,native] [--pin]   (--pin: the measured process on CPU 0, the other side on CPU 1; see pin.ts)
 */
import { fork } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { fileURLToPath } from 'node:url';
import { nativeRtpSockets } from '../gateway/media/native-rtp-sockets.ts';
import { argument } from './args.ts';
import { placeProcesses } from './pin.ts';

type Engine = 'node' | 'native';
const SOCKETS = 100;
const DATAGRAM_BYTES = 172;
const FLOOD_PER_TICK = 1_000;
const FLOOD_TICK_MS = 10;
const FLOOD_SECONDS = 5;
const SENDS = 200_000;
const HERE = fileURLToPath(import.meta.url);

function literal(
  host: string,
  _options: unknown,
  callback: (error: null, address: string, family: number) => void,
): void {
  callback(null, host, 4);
}

async function bound(port = 0): Promise<Socket> {
  const socket = createSocket({ type: 'udp4', lookup: literal });
  await new Promise<void>((resolve) => socket.bind(port, '127.0.0.1', () => resolve()));
  return socket;
}

/** A helper process: `flood <firstPort>` sends to SOCKETS ports from there; `sink` reads and ignores. */
async function helper(role: string, firstPort: number): Promise<void> {
  const socket = await bound(role === 'sink' ? firstPort : 0);
  if (role === 'sink') {
    socket.on('message', () => {});
    process.send?.('ready');
    return;
  }
  const datagram = Buffer.alloc(DATAGRAM_BYTES, 0x80);
  let next = 0;
  const timer = setInterval(() => {
    for (let k = 0; k < FLOOD_PER_TICK; k++)
      socket.send(datagram, firstPort + (next++ % SOCKETS), '127.0.0.1');
  }, FLOOD_TICK_MS);
  setTimeout(() => {
    clearInterval(timer);
    socket.close();
  }, FLOOD_SECONDS * 1000);
}

interface Cost {
  readonly datagrams: number;
  readonly userMicros: number;
  readonly systemMicros: number;
}

/** Opens SOCKETS receiving sockets on the engine from firstPort; returns a way to count and close them. */
async function openReceivers(
  engine: Engine,
  firstPort: number,
  onDatagram: () => void,
): Promise<() => void> {
  if (engine === 'node') {
    const sockets = await Promise.all(
      Array.from({ length: SOCKETS }, (_, i) => bound(firstPort + i)),
    );
    for (const socket of sockets) socket.on('message', onDatagram);
    return () => sockets.forEach((socket) => socket.close());
  }
  const native = nativeRtpSockets();
  if (native instanceof Error) throw native;
  const sockets = Array.from({ length: SOCKETS }, (_, i) =>
    native.open('127.0.0.1', firstPort + i, onDatagram),
  );
  return () => sockets.forEach((socket) => socket.close());
}

async function measureReceive(engine: Engine, firstPort: number): Promise<Cost> {
  let datagrams = 0;
  const close = await openReceivers(engine, firstPort, () => datagrams++);
  const flood = fork(HERE, ['--role', 'flood', '--port', String(firstPort)], { stdio: 'inherit' });
  console.log(
    `${engine} receive: ${placeProcesses(process.argv, [flood.pid], 'this process', 'the sender')}`,
  );
  // The first second warms up; the next three are measured.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const before = process.cpuUsage();
  const countBefore = datagrams;
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const cpu = process.cpuUsage(before);
  const counted = datagrams - countBefore;
  await new Promise((resolve) => flood.on('exit', resolve));
  close();
  return { datagrams: counted, userMicros: cpu.user, systemMicros: cpu.system };
}

async function measureSend(engine: Engine, sinkPort: number): Promise<Cost> {
  const sink = fork(HERE, ['--role', 'sink', '--port', String(sinkPort)], { stdio: 'inherit' });
  console.log(
    `${engine} send: ${placeProcesses(process.argv, [sink.pid], 'this process', 'the sink')}`,
  );
  await new Promise((resolve) => sink.once('message', resolve));
  const datagram = Buffer.alloc(DATAGRAM_BYTES, 0x80);
  let send: (i: number) => void;
  let close: () => void;
  if (engine === 'node') {
    const sockets = await Promise.all(Array.from({ length: SOCKETS }, () => bound()));
    send = (i) => (sockets[i % SOCKETS] as Socket).send(datagram, sinkPort, '127.0.0.1');
    close = () => sockets.forEach((socket) => socket.close());
  } else {
    const native = nativeRtpSockets();
    if (native instanceof Error) throw native;
    const sockets = Array.from({ length: SOCKETS }, () => native.open('127.0.0.1', 0, () => {}));
    send = (i) => void sockets[i % SOCKETS]?.send(datagram, sinkPort, '127.0.0.1');
    close = () => sockets.forEach((socket) => socket.close());
  }
  const before = process.cpuUsage();
  for (let i = 0; i < SENDS; i++) {
    send(i);
    if (i % 500 === 499) await new Promise((resolve) => setImmediate(resolve));
  }
  const cpu = process.cpuUsage(before);
  close();
  sink.kill();
  return { datagrams: SENDS, userMicros: cpu.user, systemMicros: cpu.system };
}

function line(engine: Engine, what: string, cost: Cost): string {
  const per = (micros: number) => (micros / cost.datagrams).toFixed(2).padStart(6);
  return `${engine.padEnd(7)} ${what.padEnd(8)} ${String(cost.datagrams).padStart(9)}  user ${per(cost.userMicros)} µs  system ${per(cost.systemMicros)} µs  total ${per(cost.userMicros + cost.systemMicros)} µs per datagram`;
}

async function main(): Promise<void> {
  const role = argument('role', '');
  const port = Number(argument('port', '0'));
  if (role === 'flood' || role === 'sink') return helper(role, port);
  const engine = argument('engine', '');
  if (engine === 'node' || engine === 'native') {
    console.log(line(engine, 'receive', await measureReceive(engine, 47_000)));
    console.log(line(engine, 'send', await measureSend(engine, 47_500)));
    return;
  }
  console.log(
    `udp bench: ${SOCKETS} sockets, ${DATAGRAM_BYTES}-byte datagrams on loopback, each engine in a process of its own`,
  );
  // Each engine's process places itself and its sender or sink (--pin, as pin.ts does for every bench).
  const passOn = process.argv.includes('--pin') ? ['--pin'] : [];
  for (const name of argument('engines', 'node,native').split(',')) {
    const child = fork(HERE, ['--engine', name, ...passOn], { stdio: 'inherit' });
    await new Promise((resolve) => child.on('exit', resolve));
  }
}

await main();
