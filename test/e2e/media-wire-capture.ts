/**
 * What went on the wire, seen from outside both peers: dumpcap on the loopback interface for a
 * UDP port range (and, when asked, TCP ports), read back with tshark as datagrams and segments
 * (time, ports, payload) for the test to parse as RTP or TLS itself. Started and stopped by its
 * own PID.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface CapturedDatagram {
  /** Capture time, ms since the epoch. */
  readonly atMs: number;
  /** A UDP datagram, or a TCP segment (only with `tcpPorts`). */
  readonly protocol: 'udp' | 'tcp';
  /** A TCP segment's flags (0x02 SYN, 0x10 ACK, ...); 0 for UDP. */
  readonly tcpFlags: number;
  readonly sourcePort: number;
  readonly destinationPort: number;
  readonly data: Buffer;
}

export interface WireCaptureOptions {
  /** TCP ports whose segments are captured too, either direction (e.g. a SIP over TLS listener). */
  readonly tcpPorts?: readonly number[];
  /** Also the first segment (SYN) of every TCP connection opened on `lo`, whichever its ports. */
  readonly tcpConnections?: boolean;
}

/** dumpcap's capture filter: the UDP range, and what the options add of TCP. */
function captureFilter(portMin: number, portMax: number, options: WireCaptureOptions): string {
  const clauses = [`udp and portrange ${portMin}-${portMax}`];
  const tcpPorts = options.tcpPorts ?? [];
  if (tcpPorts.length > 0)
    clauses.push(`tcp and (${tcpPorts.map((port) => `port ${port}`).join(' or ')})`);
  if (options.tcpConnections === true) clauses.push('tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn');
  return clauses.map((clause) => `(${clause})`).join(' or ');
}

export class WireCapture {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly file: string,
  ) {}

  /** Captures UDP datagrams on `lo` to or from any port in [portMin, portMax] (and `tcpPorts`). */
  static async start(
    portMin: number,
    portMax: number,
    options: WireCaptureOptions = {},
  ): Promise<WireCapture> {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-capture-'));
    const file = join(dir, 'wire.pcapng');
    const child = spawn(
      'dumpcap',
      ['-q', '-i', 'lo', '-f', captureFilter(portMin, portMax, options), '-w', file],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`dumpcap did not start: ${stderr}`)), 10_000);
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes('Capturing on')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`dumpcap exited (${code}): ${stderr}`));
      });
    });
    return new WireCapture(child, dir, file);
  }

  /** Stops capturing and returns every datagram (and TCP segment), in capture order. */
  async stop(): Promise<CapturedDatagram[]> {
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.child.pid !== undefined && this.child.exitCode === null)
      process.kill(this.child.pid, 'SIGINT');
    await exited;
    const { stdout } = await run(
      'tshark',
      [
        '-r',
        this.file,
        '-T',
        'fields',
        '-e',
        'frame.time_epoch',
        '-e',
        'udp.srcport',
        '-e',
        'udp.dstport',
        '-e',
        'udp.payload',
        '-e',
        'tcp.srcport',
        '-e',
        'tcp.dstport',
        '-e',
        'tcp.flags',
        '-e',
        'tcp.payload',
      ],
      {
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    rmSync(this.dir, { recursive: true, force: true });
    return stdout
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const [time, source, destination, payload, tcpSource, tcpDestination, flags, tcpPayload] =
          line.split('\t');
        const tcp = (tcpSource ?? '') !== '';
        return {
          atMs: Number(time) * 1000,
          protocol: tcp ? 'tcp' : 'udp',
          tcpFlags: tcp ? Number(flags) : 0,
          sourcePort: Number(tcp ? tcpSource : source),
          destinationPort: Number(tcp ? tcpDestination : destination),
          data: Buffer.from(((tcp ? tcpPayload : payload) ?? '').replace(/:/g, ''), 'hex'),
        };
      });
  }

  /** Stops without reading (a test that failed before it got that far). */
  kill(): void {
    if (this.child.pid !== undefined && this.child.exitCode === null)
      process.kill(this.child.pid, 'SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
