/**
 * A delayed-offer call to an agent: the INVITE has no SDP, callgate's 200 offers, and the ACK's
 * answer (PCMA on the caller's own port) is what the call's media must follow. The caller sends
 * no RTP at all, so symmetric RTP cannot find it: only the answer tells callgate where to send.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { alawToLinear } from '../../gateway/media/g711.ts';
import { parseRtpPacket } from '../../gateway/media/rtp-packet.ts';
import { waitFor } from '../support/processes.ts';
import { runSipp } from './sipp-runner.ts';
import { startInProcessGateway, type InProcessGateway } from '../scenarios/in-process-gateway.ts';

const SCRIPT = {
  name: 'delayed-offer-media',
  greeting: 'Hello, thank you for calling.',
  fallback: 'Anything else?',
};

/** Mean absolute sample of an A-law frame: speech is in the thousands, silence near zero. */
function alawLevel(payload: Uint8Array): number {
  let sum = 0;
  for (const code of payload) sum += Math.abs(alawToLinear(code));
  return sum / Math.max(1, payload.length);
}

let gateway: InProcessGateway | undefined;
let socket: Socket | undefined;
afterEach(async () => {
  socket?.close();
  socket = undefined;
  await gateway?.close();
  gateway = undefined;
});

describe('when a caller sends an INVITE without SDP and answers PCMA in the ACK', () => {
  it(
    'should send the greeting as PCMA to the port of the answer',
    { timeout: 60_000 },
    async () => {
      const gw = await startInProcessGateway({ script: SCRIPT });
      gateway = gw;
      const received: { payloadType: number; payload: Uint8Array }[] = [];
      const phone = createSocket('udp4');
      socket = phone;
      phone.on('message', (data) => {
        const parsed = parseRtpPacket(data);
        if (parsed.ok)
          received.push({
            payloadType: parsed.packet.payloadType,
            payload: Buffer.from(parsed.packet.payload),
          });
      });
      await new Promise<void>((resolve) => phone.bind(0, '127.0.0.1', resolve));
      const connection = gw.simulator.nextConnection(10_000);
      const sipp = runSipp({
        scenario: 'uac-delayed-offer-external-rtp.xml',
        port: gw.sipPort,
        transport: 'udp',
        service: '7000',
        timeoutSeconds: 30,
        extraArgs: ['-set', 'rtp_port', String(phone.address().port)],
      });
      const model = await connection;
      await waitFor(
        async () =>
          model.session.said.some((s) => s.text === SCRIPT.greeting && s.status === 'completed')
            ? true
            : undefined,
        15_000,
        'the greeting said',
      );
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);

      // Everything that reached the caller's port is A-law, and the greeting is in it as speech.
      expect(received.length).toBeGreaterThan(50);
      expect(new Set(received.map((r) => r.payloadType))).toEqual(new Set([8]));
      expect(received.filter((r) => alawLevel(r.payload) > 300).length).toBeGreaterThan(25);
    },
  );
});
