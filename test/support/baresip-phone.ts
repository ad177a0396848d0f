/**
 * baresip, a real softphone, headless for the e2e tests: started on ports free a moment ago with
 * the configuration a test writes, and driven through its control port (ctrl_tcp: netstrings of
 * JSON). Another test may take either port in between, and then baresip exits with "Address
 * already in use" (or its control port never answers): that start is retried on new ports, up to
 * three times.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';
import { freeSipPort } from './ports.ts';
import { waitFor } from './processes.ts';

export interface Phone {
  readonly phone: ChildProcess;
  /** baresip's control connection. */
  readonly control: Socket;
  readonly output: () => string;
  readonly exited: Promise<unknown>;
  /** Sends one control command (`dial`, `hangup`, ...). */
  command(name: string, params?: string): void;
}

/** Connects to baresip's control port; undefined while nothing listens there. */
function connectControl(port: number): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => resolve(socket));
    socket.once('error', () => resolve(undefined));
  });
}

/** Starts baresip in `dir` with the `config` file `configFor` writes for its two ports. */
export async function startPhone(
  dir: string,
  configFor: (sipPort: number, controlPort: number) => string,
): Promise<Phone> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const sipPort = await freeSipPort();
    const controlPort = await freeLoopbackPort();
    writeFileSync(join(dir, 'config'), configFor(sipPort, controlPort));
    const phone = spawn('baresip', ['-f', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    phone.stdout.on('data', (d: Buffer) => (output += d.toString()));
    phone.stderr.on('data', (d: Buffer) => (output += d.toString()));
    let gone = false;
    const exited = new Promise((resolve) =>
      phone.once('exit', (code, signal) => {
        gone = true;
        resolve(code ?? signal);
      }),
    );
    // baresip's output goes to a pipe and is buffered: it is ready when its control port answers.
    const control = await waitFor(
      async () => (gone ? null : await connectControl(controlPort)),
      10_000,
      'baresip to start',
    ).catch(() => null);
    if (control !== null && !gone) {
      const command = (name: string, params = ''): void => {
        const json = JSON.stringify({ command: name, params, token: name });
        control.write(`${Buffer.byteLength(json)}:${json},`);
      };
      return { phone, control, output: () => output, exited, command };
    }
    control?.destroy();
    phone.kill('SIGKILL');
    const status = await exited;
    failures.push(
      `attempt ${attempt} (sip ${sipPort}, control ${controlPort}) ended with ${String(status)}: ${output.slice(-1_000)}`,
    );
  }
  throw new Error(`baresip did not start:\n${failures.join('\n')}`);
}
