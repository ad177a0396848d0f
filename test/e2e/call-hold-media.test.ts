/**
 * A caller holds the call while the agent speaks (RFC 3264 §6.1: a sendonly offer, answered
 * recvonly) and resumes it. While held, callgate must send the caller no RTP at all; the agent's
 * speech waits and goes on after the resume, its first packet marking a new talk spurt.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { parseRtpPacket } from '../../gateway/media/rtp-packet.ts';
import { waitFor } from '../support/processes.ts';
import { runSipp } from './sipp-runner.ts';
import { startInProcessGateway, type InProcessGateway } from '../scenarios/in-process-gateway.ts';

// Long enough to be still speaking when the hold ends (the call lasts five seconds).
const GREETING = Array.from(
  { length: 6 },
  () => 'Thank you for calling the harbour restaurant, we are glad to hear from you today.',
).join(' ');
const SCRIPT = { name: 'hold-media', greeting: GREETING, fallback: 'Anything else?' };

let gateway: InProcessGateway | undefined;
let socket: Socket | undefined;
afterEach(async () => {
  socket?.close();
  socket = undefined;
  await gateway?.close();
  gateway = undefined;
});

describe('when the caller holds the call while the agent speaks, and resumes it', () => {
  it(
    'should send no RTP while held, and go on speaking after the resume with a marker',
    { timeout: 60_000 },
    async () => {
      const gw = await startInProcessGateway({ script: SCRIPT });
      gateway = gw;
      const received: { at: number; marker: boolean }[] = [];
      const phone = createSocket('udp4');
      socket = phone;
      phone.on('message', (data) => {
        const parsed = parseRtpPacket(data);
        if (parsed.ok) received.push({ at: performance.now(), marker: parsed.packet.marker });
      });
      await new Promise<void>((resolve) => phone.bind(0, '127.0.0.1', resolve));
      const connection = gw.simulator.nextConnection(10_000);
      const sipp = runSipp({
        scenario: 'uac-hold-external-rtp.xml',
        port: gw.sipPort,
        transport: 'udp',
        service: '7000',
        timeoutSeconds: 30,
        extraArgs: ['-set', 'rtp_port', String(phone.address().port)],
      });
      await connection;
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);
      await waitFor(
        async () => (gw.sessions.length > 0 ? true : undefined),
        5_000,
        'the call session',
      );

      // The longest silence on the wire is the hold: about two seconds, with speech on both sides.
      let gapAt = 0;
      let gap = 0;
      for (let i = 1; i < received.length; i++) {
        const between = (received[i]?.at ?? 0) - (received[i - 1]?.at ?? 0);
        if (between > gap) {
          gap = between;
          gapAt = i;
        }
      }
      expect(gap).toBeGreaterThan(1_500);
      expect(gap).toBeLessThan(3_500);
      expect(gapAt).toBeGreaterThan(50);
      expect(received.length - gapAt).toBeGreaterThan(50);
      expect(received[gapAt]?.marker).toBe(true);
      // Nothing else is silent for nearly as long: speech before and after is continuous (a loaded
      // machine may stall a few hundred milliseconds).
      const otherGaps = received
        .slice(1)
        .map((r, i) => r.at - (received[i]?.at ?? 0))
        .filter((_, i) => i + 1 !== gapAt);
      expect(Math.max(...otherGaps)).toBeLessThan(1_000);
    },
  );
});
