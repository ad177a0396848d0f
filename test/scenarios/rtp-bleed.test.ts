/**
 * RTP bleed against the whole call path: sipp dials the in-process gateway, the caller is silent
 * (silence suppression), and another host (127.0.0.2) sends loud audio to the call's RTP port at
 * call start and again after 1.5 s of the caller's silence. Callgate sends it none of the agent's
 * speech, the model hears none of it, and the caller keeps hearing the agent.
 */
import { createSocket, type Socket } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { encodeUlaw } from '../../gateway/media/g711.ts';
import { serializeRtpPacket } from '../../gateway/media/rtp-packet.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startInProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const SCRIPT = {
  name: 'rtp-bleed',
  greeting:
    'Hello, and thank you for calling. This greeting runs on for a while, so that there is ' +
    'plenty of the agent speaking while someone else tries to take the call over. It goes on ' +
    'and on, sentence after sentence, until the test has seen what it needs to see.',
  fallback: 'Anything else?',
};

/** 20 ms of a loud two-tone signal: speech to the simulator's VAD, were it ever to reach it. */
const LOUD = (() => {
  const samples = new Int16Array(160);
  for (let i = 0; i < samples.length; i++)
    samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 500 * i) / 8000));
  return encodeUlaw(samples);
})();

const own = closeAfterEach();

async function attackerSocket(): Promise<{ socket: Socket; received: Buffer[] }> {
  const socket = createSocket('udp4');
  const received: Buffer[] = [];
  socket.on('message', (data) => received.push(data));
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.2', resolve));
  own({ close: () => new Promise<void>((resolve) => socket.close(() => resolve())) });
  return { socket, received };
}

async function spray(socket: Socket, port: number, firstSeq: number): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const packet = serializeRtpPacket({
      payloadType: 0,
      marker: i === 0,
      sequenceNumber: firstSeq + i,
      timestamp: (firstSeq + i) * 160,
      ssrc: 0x0bad0bad,
      payload: LOUD,
    });
    socket.send(packet, port, '127.0.0.1');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('when another host sends RTP to a silent caller’s call', () => {
  it(
    'should send it none of the agent’s audio, let none of it reach the model, and keep the caller hearing',
    { timeout: 90_000 },
    async () => {
      const gw = own(await startInProcessGateway({ script: SCRIPT, speechSpeed: 1 }));
      const { rtp, model } = await placeCall(gw, { holdMs: 6_000, own });
      const callPort = rtp.source?.port;
      expect(callPort).toBeDefined();
      // The caller goes silent (silence suppression); the attacker strikes at once, then again
      // once the caller has been silent for 1.5 s.
      rtp.mute();
      const attacker = await attackerSocket();
      await spray(attacker.socket, callPort as number, 100);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const secondAttackAt = Date.now();
      await spray(attacker.socket, callPort as number, 200);
      await waitFor(
        async () => (rtp.audibleSince(secondAttackAt) >= 20 ? true : undefined),
        10_000,
        'the caller to go on hearing the agent',
      );
      expect(attacker.received).toHaveLength(0);
      expect(model.session.heard.filter((h) => h.kind === 'utterance')).toEqual([]);
    },
  );
});
