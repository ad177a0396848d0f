/**
 * What went on the wire, seen from outside both peers: dumpcap on the loopback interface for a
 * UDP port range, read back with tshark as datagrams (time, ports, payload) for the test to parse
 * as RTP itself. Started and stopped by its own PID.
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
  readonly sourcePort: number;
  readonly destinationPort: number;
  readonly data: Buffer;
}

export class WireCapture {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly file: string,
  ) {}

  /** Captures UDP datagrams on `lo` to or from any port in [portMin, portMax]. */
  static async start(portMin: number, portMax: number): Promise<WireCapture> {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-capture-'));
    const file = join(dir, 'wire.pcapng');
    const child = spawn(
      'dumpcap',
      ['-q', '-i', 'lo', '-f', `udp and portrange ${portMin}-${portMax}`, '-w', file],
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

  /** Stops capturing and returns every datagram, in capture order. */
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
        const [time, source, destination, payload] = line.split('\t');
        return {
          atMs: Number(time) * 1000,
          sourcePort: Number(source),
          destinationPort: Number(destination),
          data: Buffer.from((payload ?? '').replace(/:/g, ''), 'hex'),
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
