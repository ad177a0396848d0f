/**
 * A re-INVITE that changes the codec of a live call (PCMU to PCMA) is applied to its RTP at once:
 * callgate sends PCMA from the new answer on, understands the caller's PCMA and key presses, and
 * the agent is heard in the new codec; the call, its model session and its context go on.
 */
import { createSocket, type Socket } from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { alawToLinear, encodeAlaw, encodeUlaw } from '../../gateway/media/g711.ts';
import { parseRtpPacket, serializeRtpPacket } from '../../gateway/media/rtp-packet.ts';
import { serializeTelephoneEvent } from '../../gateway/media/telephone-event.ts';
import { waitFor } from '../support/processes.ts';
import { runSipp } from './sipp-runner.ts';
import { startInProcessGateway, type InProcessGateway } from '../scenarios/in-process-gateway.ts';

const SCRIPT = {
  name: 'reinvite-codec',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: { '7': { say: 'You pressed seven after the change.' } },
};

interface Received {
  readonly at: number;
  readonly payloadType: number;
  readonly payload: Buffer;
}

/** The caller's RTP: silence in whichever G.711 codec callgate last sent, and one key press on demand. */
class CodecFollowingPhone {
  readonly received: Received[] = [];
  private remote: { address: string; port: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sequence = 1;
  private timestamp = 0;
  private digitFrame = -1;
  private digitStart = 0;

  constructor(private readonly socket: Socket) {
    socket.on('message', (data, from) => {
      const parsed = parseRtpPacket(data);
      if (!parsed.ok) return;
      this.received.push({
        at: Date.now(),
        payloadType: parsed.packet.payloadType,
        payload: Buffer.from(parsed.packet.payload),
      });
      if (this.remote === undefined) {
        this.remote = { address: from.address, port: from.port };
        this.timer = setInterval(() => this.frame(), 20);
      }
    });
  }

  static async open(): Promise<CodecFollowingPhone> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new CodecFollowingPhone(socket);
  }

  get port(): number {
    return this.socket.address().port;
  }

  press(): void {
    this.digitFrame = 0;
    this.digitStart = this.timestamp;
  }

  close(): void {
    clearInterval(this.timer);
    this.socket.close();
  }

  private frame(): void {
    const remote = this.remote;
    if (remote === undefined) return;
    const last =
      this.received.filter((r) => r.payloadType === 0 || r.payloadType === 8).at(-1)?.payloadType ??
      0;
    let payloadType = last;
    let payload = last === 8 ? encodeAlaw(new Int16Array(160)) : encodeUlaw(new Int16Array(160));
    let timestamp = this.timestamp;
    if (this.digitFrame >= 0 && this.digitFrame < 8) {
      payloadType = 101;
      timestamp = this.digitStart;
      payload = serializeTelephoneEvent({
        digit: '7',
        end: this.digitFrame >= 5,
        volume: 10,
        duration: Math.min(this.digitFrame + 1, 5) * 160,
      });
      this.digitFrame++;
    }
    this.socket.send(
      serializeRtpPacket({
        payloadType,
        sequenceNumber: this.sequence++ & 0xffff,
        timestamp,
        ssrc: 0x1234,
        marker: false,
        payload,
      }),
      remote.port,
      remote.address,
    );
    this.timestamp = (this.timestamp + 160) >>> 0;
  }
}

/** Mean absolute sample of an A-law frame: speech is in the thousands, silence near zero. */
function alawLevel(payload: Buffer): number {
  let sum = 0;
  for (const code of payload) sum += Math.abs(alawToLinear(code));
  return sum / Math.max(1, payload.length);
}

let gateway: InProcessGateway | undefined;
let phone: CodecFollowingPhone | undefined;
afterEach(async () => {
  phone?.close();
  phone = undefined;
  await gateway?.close();
  gateway = undefined;
});

describe('when the caller changes the codec of a live call by re-INVITE', () => {
  it(
    'should switch the RTP to PCMA, hear the caller’s key in the new codec and answer in it',
    { timeout: 60_000 },
    async () => {
      const gw = await startInProcessGateway({ script: SCRIPT });
      gateway = gw;
      const rtp = await CodecFollowingPhone.open();
      phone = rtp;
      const connection = gw.simulator.nextConnection(10_000);
      const sipp = runSipp({
        scenario: 'uac-reinvite-codec-external-rtp.xml',
        port: gw.sipPort,
        transport: 'udp',
        service: '7000',
        pauseMs: 2_500,
        timeoutSeconds: 30,
        extraArgs: ['-set', 'rtp_port', String(rtp.port)],
      });
      const model = await connection;

      const changed = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'codec_changed'),
        10_000,
        'the codec change',
      );
      expect(changed.event).toEqual({
        type: 'codec_changed',
        from: 'PCMU',
        to: 'PCMA',
        passthrough: false,
      });
      // The greeting went out as PCMU; from the change on, only PCMA (a packet already in flight aside).
      expect(rtp.received.filter((r) => r.at < changed.at).every((r) => r.payloadType === 0)).toBe(
        true,
      );
      expect(
        rtp.received.filter((r) => r.at < changed.at && r.payloadType === 0).length,
      ).toBeGreaterThan(10);

      await new Promise((resolve) => setTimeout(resolve, 500));
      const pressedAt = Date.now();
      rtp.press();
      await waitFor(
        async () =>
          model.session.heard.some((r) => r.kind === 'dtmf' && r.digit === '7') ? true : undefined,
        5_000,
        'the key after the change',
      );
      await waitFor(
        async () =>
          model.session.said.some(
            (s) => s.text === 'You pressed seven after the change.' && s.status === 'completed',
          )
            ? true
            : undefined,
        8_000,
        'the answer',
      );
      const result = await sipp;
      expect(result.exitCode, result.stderr).toBe(0);

      const after = rtp.received.filter((r) => r.at > changed.at + 100);
      expect(after.length).toBeGreaterThan(50);
      expect(after.every((r) => r.payloadType === 8)).toBe(true);
      // The answer to the key, heard as A-law speech.
      const spoken = rtp.received.filter(
        (r) => r.at > pressedAt && r.payloadType === 8 && alawLevel(r.payload) > 300,
      );
      expect(spoken.length).toBeGreaterThan(25);
      // One model session all along: the change kept the call and its context.
      expect(gw.events.filter((e) => e.event.type === 'model_ready')).toHaveLength(1);
      const ended = await waitFor(
        async () => gw.events.find((e) => e.event.type === 'ended'),
        5_000,
        'the end of the call',
      );
      expect(ended.event).toMatchObject({ reason: 'caller_hung_up' });
    },
  );
});
