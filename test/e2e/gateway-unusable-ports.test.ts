/**
 * The gateway as the product runs it (gateway/main.ts) and a caller naming port 0 where callgate
 * would send: a Contact on port 0 in an INVITE without SDP, the flow that made the process exit
 * (the 200 carried an offer, the ACK no answer, and the BYE to port 0 threw in a promise nobody
 * handled), and a Via on port 0. The gateway answers 400, stays up, and takes the next call.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';

const SCRIPT = { name: 'e2e-unusable-ports', greeting: 'Hello.', fallback: 'Anything else?' };

let callgate: CallgateProcess | undefined;
let socket: Socket | undefined;
afterEach(async () => {
  socket?.close();
  socket = undefined;
  await callgate?.stop();
  callgate = undefined;
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function request(
  method: string,
  o: {
    port: number;
    sipPort: number;
    callId: string;
    branch: string;
    via?: string;
    headers?: readonly string[];
    toTag?: string;
  },
): string {
  const lines = [
    `${method} sip:1000@127.0.0.1:${o.sipPort} SIP/2.0`,
    `Via: ${o.via ?? `SIP/2.0/UDP 127.0.0.1:${o.port}`};branch=${o.branch}`,
    'Max-Forwards: 70',
    'From: <sip:caller@127.0.0.1>;tag=c1',
    `To: <sip:1000@127.0.0.1>${o.toTag !== undefined ? `;tag=${o.toTag}` : ''}`,
    `Call-ID: ${o.callId}`,
    `CSeq: 1 ${method}`,
    ...(o.headers ?? []),
    'Content-Length: 0',
  ];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

describe('when a caller names port 0 to the gateway', () => {
  it('should answer 400, stay up, and answer the next call', { timeout: 90_000 }, async () => {
    const cg = await startCallgate({ script: SCRIPT });
    callgate = cg;
    const udp = createSocket('udp4');
    socket = udp;
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const port = udp.address().port;
    const received: string[] = [];
    udp.on('message', (data) => received.push(data.toString()));
    const send = (text: string): void => udp.send(Buffer.from(text), cg.sipPort, '127.0.0.1');
    const finalTo = async (callId: string): Promise<string> => {
      for (let i = 0; i < 100; i++) {
        const found = received.find(
          (text) => /^SIP\/2\.0 [2-6]\d\d /.test(text) && text.includes(`Call-ID: ${callId}\r\n`),
        );
        if (found !== undefined) return found;
        await sleep(50);
      }
      throw new Error(`no final response for ${callId}`);
    };

    const invite = {
      port,
      sipPort: cg.sipPort,
      callId: `contact-port0-${Date.now()}`,
      branch: 'z9hG4bK-e2e-contact0',
    };
    send(request('INVITE', { ...invite, headers: ['Contact: <sip:caller@127.0.0.1:0>'] }));
    const answer = await finalTo(invite.callId);
    // Whatever the answer, the ACK without SDP follows: the step that used to end the process.
    send(
      request('ACK', { ...invite, toTag: /\r\nTo: [^\r]*;tag=([^;\r]+)/.exec(answer)?.[1] ?? 'x' }),
    );
    const exited = await Promise.race([cg.proc.exited, sleep(2_000).then(() => 'running')]);
    expect(exited, cg.proc.output().slice(-2000)).toBe('running');
    expect(cg.proc.output()).not.toMatch(/ERR_SOCKET_BAD_PORT|unhandled/i);
    expect(answer.split('\r\n')[0]).toBe('SIP/2.0 400 Invalid Port 0 in Contact');

    const options = {
      port,
      sipPort: cg.sipPort,
      callId: `via-port0-${Date.now()}`,
      branch: 'z9hG4bK-e2e-via0',
    };
    send(request('OPTIONS', { ...options, via: 'SIP/2.0/UDP 10.9.9.9:0' }));
    expect((await finalTo(options.callId)).split('\r\n')[0]).toBe(
      'SIP/2.0 400 Invalid Port 0 in Via',
    );

    const result = await runSipp({
      scenario: 'uac-delayed-offer.xml',
      port: cg.sipPort,
      transport: 'udp',
      service: '1000',
      pauseMs: 500,
      timeoutSeconds: 30,
    });
    expect(result.exitCode, result.stderr).toBe(0);
  });
});
