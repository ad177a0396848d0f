/**
 * The media path against a real SIP peer and the real gateway process: sipp calls a number whose
 * tenant is in a media test mode, plays μ-law speech from a WAV file (rtp_stream) and then
 * RFC 4733 key presses replayed from sip-tester's captures (play_pcap_audio). What went on the
 * wire both ways is captured on the loopback interface and compared with what was sent; the record
 * mode's files are compared with it too.
 *
 * The speech fixture is raw μ-law (sipp 3.6's rtp_stream sends a file's bytes as they are, a WAV
 * header included), made with
 *   espeak-ng -s 160 -w s.wav "Hello, a table for two at seven, please."
 *   sox s.wav -r 8000 -c 1 -t raw -e u-law caller-speech.pcmu pad 0 0.01325   (163 whole frames)
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MediaTestRecording } from '../../gateway/media/media-test-endpoint.ts';
import { parseRtpPacket, type RtpPacket } from '../../gateway/media/rtp-packet.ts';
import { parseTelephoneEvent } from '../../gateway/media/telephone-event.ts';
import { readWavFile } from '../../gateway/media/wav-file.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { WireCapture, type CapturedDatagram } from './media-wire-capture.ts';
import { SIPP_FIXTURES, runSipp } from './sipp-runner.ts';

const MEDIA_FIXTURES = resolve(import.meta.dirname, '../fixtures/sipp/media');
const SPEECH_FILE = join(MEDIA_FIXTURES, 'caller-speech.pcmu');
const SIP_TESTER_PCAPS =
  ['/usr/share/sip-tester', '/usr/share/sipp'].find((dir) =>
    existsSync(join(dir, 'dtmf_2833_1.pcap')),
  ) ?? '/usr/share/sip-tester';
/**
 * The keys pressed, in the order of the captures' own sequence numbers and timestamps (the pcaps
 * are cut from one call: 1 < 5 < 9 < # on both), so the replay is one well-formed stream.
 */
const DIGITS = [
  { digit: '1', pcap: 'dtmf_2833_1.pcap' },
  { digit: '5', pcap: 'dtmf_2833_5.pcap' },
  { digit: '9', pcap: 'dtmf_2833_9.pcap' },
  { digit: '#', pcap: 'dtmf_2833_pound.pcap' },
] as const;
/** Each capture holds one press of 280 ms (2240 samples at 8 kHz): 7 updates and 3 end packets. */
const DIGIT_DURATION_MS = 280;
const PACKETS_PER_DIGIT = 10;
const FRAME_BYTES = 160;
/**
 * After the speech, sipp's captures come with their own SSRC: the gateway follows it only once the
 * speech's SSRC has been silent for RELATCH_AFTER_SILENCE_MS (1 s), so the keys wait that long.
 */
const SILENCE_BEFORE_DIGITS_MS = 1_400;
const BETWEEN_DIGITS_MS = 500;
const TAIL_MS = 800;
/**
 * A media range of its own: the capture filter and the port checks rely on it. Its lower half is
 * the gateway on the native RTP sockets (the default), its upper half the one on Node's dgram.
 */
const RTP_PORT_MIN = 47_000 + 100 * (process.pid % 20);
const RTP_PORT_MAX = RTP_PORT_MIN + 98;
const NODE_SOCKETS_PORT_MIN = RTP_PORT_MIN + 50;
const ECHO_NUMBER = '9100';
const RECORD_NUMBER = '9101';

const speech = readFileSync(SPEECH_FILE);
const speechFrames = Array.from({ length: speech.length / FRAME_BYTES }, (_, i) =>
  speech.subarray(i * FRAME_BYTES, (i + 1) * FRAME_BYTES),
);
const speechMs = speechFrames.length * 20;

let callgate: CallgateProcess | undefined;
let workDir = '';
let recordDir = '';

function startMediaGateway(rtp: {
  portMin: number;
  portMax: number;
  sockets?: string;
}): Promise<CallgateProcess> {
  return startCallgate({
    script: { name: 'e2e-media', greeting: 'Hello.', fallback: 'Sorry?' },
    overrides: (config) => {
      config.rtp = { ...(config.rtp as Record<string, unknown>), ...rtp };
      const tenants = config.tenants as Array<Record<string, unknown>>;
      const trunk = { allowFrom: ['127.0.0.1/32'] };
      tenants.push({
        id: 'echo-test',
        numbers: [ECHO_NUMBER],
        agent: 'concierge',
        trunk,
        mediaTest: { mode: 'echo' },
      });
      tenants.push({
        id: 'record-test',
        numbers: [RECORD_NUMBER],
        agent: 'concierge',
        trunk,
        mediaTest: { mode: 'record', recordDir },
      });
    },
  });
}

/** The RTP sockets the gateway said it uses when it began taking calls, and what /metrics says. */
async function rtpSocketsOf(cg: CallgateProcess): Promise<{ logged: unknown; metric: string[] }> {
  const line = cg.proc
    .stdout()
    .split('\n')
    .find((l) => l.includes('calls accepted'));
  const scrape = await (await fetch(`${cg.httpUrl}/metrics`)).text();
  return {
    logged:
      line === undefined ? undefined : (JSON.parse(line) as Record<string, unknown>).rtp_sockets,
    metric: scrape.split('\n').filter((l) => l.startsWith('callgate_rtp_sockets_info{')),
  };
}

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), 'callgate-media-e2e-'));
  recordDir = join(workDir, 'recordings');
  callgate = await startMediaGateway({ portMin: RTP_PORT_MIN, portMax: NODE_SOCKETS_PORT_MIN - 2 });
}, 60_000);

afterAll(async () => {
  await callgate?.stop();
  if (workDir !== '') rmSync(workDir, { recursive: true, force: true });
});

/** The scenario with this run's file paths and pauses filled in (sipp reads them at load time). */
function writeScenario(): string {
  const template = readFileSync(join(MEDIA_FIXTURES, 'uac-media-test.xml'), 'utf8');
  const digits = DIGITS.map(
    ({ pcap }) =>
      `  <nop><action><exec play_pcap_audio="${join(SIP_TESTER_PCAPS, pcap)}"/></action></nop>\n  <pause milliseconds="${BETWEEN_DIGITS_MS}"/>`,
  ).join('\n');
  const scenario = template
    .replace('@SPEECH_FILE@', SPEECH_FILE)
    .replace('@SPEECH_PAUSE_MS@', String(speechMs + SILENCE_BEFORE_DIGITS_MS))
    .replace('@DIGITS@', digits)
    .replace('@TAIL_PAUSE_MS@', String(TAIL_MS));
  const file = join(workDir, `uac-media-test-${Date.now()}.xml`);
  writeFileSync(file, scenario);
  return file;
}

interface CallOnTheWire {
  readonly sippTrace: string;
  readonly gatewayPort: number;
  /** RTP the caller sent to the gateway, in capture order. */
  readonly inbound: Array<{ atMs: number; packet: RtpPacket }>;
  /** RTP the gateway sent to the caller. */
  readonly outbound: Array<{ atMs: number; packet: RtpPacket }>;
}

async function callAndCapture(
  number: string,
  cg: CallgateProcess | undefined = callgate,
): Promise<CallOnTheWire> {
  if (cg === undefined) throw new Error('callgate did not start');
  const capture = await WireCapture.start(RTP_PORT_MIN, RTP_PORT_MAX + 1);
  let datagrams: CapturedDatagram[];
  let trace: string;
  try {
    const result = await runSipp({
      scenario: relative(SIPP_FIXTURES, writeScenario()),
      port: cg.sipPort,
      transport: 'udp',
      service: number,
      timeoutSeconds: 30,
    });
    expect(result.exitCode, result.stderr + result.stdout.slice(-2000)).toBe(0);
    trace = result.trace;
    // Datagrams still in flight when sipp exits.
    await new Promise((done) => setTimeout(done, 200));
  } finally {
    datagrams = await capture.stop();
  }
  const ports = [...trace.matchAll(/^\s*m=audio (\d+) /gm)].map((m) => Number(m[1]));
  // The INVITE's offer first (sipp's media port), then the gateway's answer.
  const gatewayPort = ports.find((port) => port >= RTP_PORT_MIN && port <= RTP_PORT_MAX) ?? -1;
  const rtp = (d: CapturedDatagram) => {
    const parsed = parseRtpPacket(d.data);
    return parsed.ok ? [{ atMs: d.atMs, packet: parsed.packet }] : [];
  };
  return {
    sippTrace: trace,
    gatewayPort,
    inbound: datagrams.filter((d) => d.destinationPort === gatewayPort).flatMap(rtp),
    outbound: datagrams.filter((d) => d.sourcePort === gatewayPort).flatMap(rtp),
  };
}

/** RFC 4733 packets grouped into presses (one start timestamp each), in order. */
function pressesOf(
  packets: readonly RtpPacket[],
): Array<{ digit: string | null; durations: number[]; ends: number; markers: number }> {
  const presses = new Map<
    number,
    { digit: string | null; durations: number[]; ends: number; markers: number }
  >();
  for (const packet of packets) {
    const event = parseTelephoneEvent(packet.payload);
    if (event === null) continue;
    const press = presses.get(packet.timestamp) ?? {
      digit: event.digit,
      durations: [],
      ends: 0,
      markers: 0,
    };
    press.durations.push(event.duration);
    if (event.end) press.ends++;
    if (packet.marker) press.markers++;
    presses.set(packet.timestamp, press);
  }
  return [...presses.values()];
}

/** Frames a loaded machine may deliver too late for the jitter buffer; each is dropped, never altered. */
const MAX_LATE_FRAMES = 4;
/** μ-law bytes of (near) silence: 0xff and 0x7f are +0 and -0, 0xfe and 0x7e the smallest steps. */
const MULAW_SILENCE = new Set([0xff, 0x7f, 0xfe, 0x7e]);

describe('when a caller talks and presses keys on the echo number', () => {
  it(
    'should send every speech frame back byte for byte, paced, with continuous sequence numbers and timestamps, and each key back once with the length it was held',
    { timeout: 60_000 },
    async () => {
      expect(callgate === undefined ? undefined : await rtpSocketsOf(callgate)).toEqual({
        logged: 'native',
        metric: ['callgate_rtp_sockets_info{engine="native"} 1'],
      });
      const wire = await callAndCapture(ECHO_NUMBER);
      expect(wire.gatewayPort).toBeLessThan(NODE_SOCKETS_PORT_MIN);
      expectEchoed(wire);
    },
  );

  it(
    "should do the same on Node's dgram sockets (rtp.sockets: node)",
    { timeout: 90_000 },
    async () => {
      const cg = await startMediaGateway({
        portMin: NODE_SOCKETS_PORT_MIN,
        portMax: RTP_PORT_MAX,
        sockets: 'node',
      });
      try {
        expect(await rtpSocketsOf(cg)).toEqual({
          logged: 'node',
          metric: ['callgate_rtp_sockets_info{engine="node"} 1'],
        });
        const wire = await callAndCapture(ECHO_NUMBER, cg);
        expect(wire.gatewayPort).toBeGreaterThanOrEqual(NODE_SOCKETS_PORT_MIN);
        expectEchoed(wire);
      } finally {
        await cg.stop();
      }
    },
  );
});

/** The echo of the call's speech and keys: every frame back byte for byte, paced, keys once each. */
function expectEchoed(wire: CallOnTheWire): void {
  expect(speechFrames).toHaveLength(163);
  expect(wire.gatewayPort).toBeGreaterThan(0);

  // What sipp put on the wire: the WAV's frames in order, then the captures' key presses.
  const sentSpeech = wire.inbound.filter((p) => p.packet.payloadType === 0);
  const sentKeys = wire.inbound.filter((p) => p.packet.payloadType === 101);
  expect(sentSpeech.map((p) => p.packet.payload.toString('hex'))).toEqual(
    speechFrames.map((f) => f.toString('hex')),
  );
  expect(sentKeys).toHaveLength(DIGITS.length * PACKETS_PER_DIGIT);

  // What came back: one SSRC, the speech first, byte for byte.
  const echo = wire.outbound.filter((p) => p.packet.payloadType === 0);
  expect(new Set(wire.outbound.map((p) => p.packet.ssrc)).size).toBe(1);
  // Byte for byte and in order. A frame that reached the gateway later than its jitter buffer
  // allows (this machine stalled: the suite runs test files in parallel) is dropped, not
  // reordered or altered; at most a few of those are tolerated, and every other frame must match.
  const expected = speechFrames.map((f) => f.toString('hex'));
  const echoedSpeech: typeof echo = [];
  const matchedSent: number[] = [];
  let next = 0;
  for (const packet of echo) {
    const hex = packet.packet.payload.toString('hex');
    let at = next;
    while (at < expected.length && at - next <= MAX_LATE_FRAMES && expected[at] !== hex) at++;
    if (at >= expected.length || expected[at] !== hex) {
      if (next >= expected.length) break; // past the speech: the silence and keys that follow
      // Inside the speech only silence may stand where a late frame was: never other audio.
      expect(
        [...packet.packet.payload].every((b) => MULAW_SILENCE.has(b)),
        `echoed frame ${hex.slice(0, 16)}... is neither sent speech nor silence`,
      ).toBe(true);
      continue;
    }
    echoedSpeech.push(packet);
    matchedSent.push(at);
    next = at + 1;
  }
  const dropped = expected.length - echoedSpeech.length;
  expect(dropped).toBeLessThanOrEqual(MAX_LATE_FRAMES);
  expect(echoedSpeech.length).toBeGreaterThan(0);
  expect(echoedSpeech[0]?.packet.marker).toBe(true);
  // Sequence numbers have no gap over everything the gateway sent (audio and events alike).
  for (let i = 1; i < wire.outbound.length; i++) {
    expect(
      ((wire.outbound[i]?.packet.sequenceNumber ?? 0) -
        (wire.outbound[i - 1]?.packet.sequenceNumber ?? 0)) &
        0xffff,
    ).toBe(1);
  }
  // Timestamps advance one frame per packet while the speech is echoed. Where a stalled machine
  // left the playout with nothing to send, the clock went on and the next packet starts a new
  // talk spurt (RFC 3551): a larger step, on whole frames, with the marker; a few at most.
  const firstEcho = wire.outbound.indexOf(echoedSpeech[0] as (typeof wire.outbound)[number]);
  const lastEcho = wire.outbound.indexOf(echoedSpeech.at(-1) as (typeof wire.outbound)[number]);
  let resumed = 0;
  for (let i = firstEcho + 1; i <= lastEcho; i++) {
    const step =
      ((wire.outbound[i]?.packet.timestamp ?? 0) -
        (wire.outbound[i - 1]?.packet.timestamp ?? 0)) >>>
      0;
    const marker = wire.outbound[i]?.packet.marker === true;
    if (step === 160 && !marker) continue;
    expect({ step: step % 160, longer: step > 160, marker }, `packet ${i} of the echo`).toEqual({
      step: 0,
      longer: true,
      marker: true,
    });
    resumed++;
  }
  expect(resumed).toBeLessThanOrEqual(MAX_LATE_FRAMES);
  // Paced at 20 ms: the echo of the speech takes as long as the speech, each frame after its original.
  const span = (echoedSpeech.at(-1)?.atMs ?? 0) - (echoedSpeech[0]?.atMs ?? 0);
  expect(Math.abs(span - (lastEcho - firstEcho) * 20)).toBeLessThan(100);
  const delays = echoedSpeech.map((p, i) => p.atMs - (sentSpeech[matchedSent[i] ?? 0]?.atMs ?? 0));
  expect(Math.min(...delays)).toBeGreaterThan(0);
  expect(Math.max(...delays)).toBeLessThan(500);

  // The keys came back as RFC 4733 events: each once, in order, held 280 ms, three end packets.
  const keysBack = pressesOf(
    wire.outbound.filter((p) => p.packet.payloadType === 101).map((p) => p.packet),
  );
  expect(keysBack.map((k) => k.digit)).toEqual(DIGITS.map((d) => d.digit));
  for (const key of keysBack) {
    expect(key.markers).toBe(1);
    expect(key.ends).toBe(3);
    expect(Math.max(...key.durations)).toBe((DIGIT_DURATION_MS * 8000) / 1000);
  }
}

describe('when a caller talks and presses keys on the record number', () => {
  it(
    'should keep the speech exactly as sent and each digit once, in order, with the duration it was held',
    { timeout: 60_000 },
    async () => {
      const wire = await callAndCapture(RECORD_NUMBER);
      // The record mode answers and listens: it sends nothing.
      expect(
        wire.outbound.filter((p) => p.packet.payloadType === 0 || p.packet.payloadType === 101),
      ).toHaveLength(0);
      const callId = /^Call-ID: (.+)$/m.exec(wire.sippTrace)?.[1]?.trim() ?? '';
      const name = callId.replace(/[^A-Za-z0-9._-]/g, '_');
      const jsonFile = join(recordDir, `${name}.json`);
      // The files are written once the BYE has been answered and the media released.
      const deadline = Date.now() + 5_000;
      while (!existsSync(jsonFile) && Date.now() < deadline)
        await new Promise((done) => setTimeout(done, 50));
      expect(readdirSync(recordDir)).toContain(`${name}.json`);
      const recording = JSON.parse(readFileSync(jsonFile, 'utf8')) as MediaTestRecording;
      const wav = readWavFile(readFileSync(join(recordDir, recording.audio.file)));

      expect(wav).toMatchObject({ format: 7, sampleRate: 8000, bitsPerSample: 8 });
      // Every frame as sent, in order. A frame that reached a stalled machine later than the jitter
      // buffer allows is concealed instead (a few at most); every frame the recording counts as
      // received is one of the sent frames, in its order.
      const received = recording.audio.frames - recording.audio.concealedFrames;
      expect(received).toBeGreaterThanOrEqual(speechFrames.length - MAX_LATE_FRAMES);
      expect(received).toBeLessThanOrEqual(speechFrames.length);
      let next = 0;
      let matched = 0;
      const data = wav?.data ?? Buffer.alloc(0);
      for (
        let at = 0;
        at + FRAME_BYTES <= data.length && next < speechFrames.length;
        at += FRAME_BYTES
      ) {
        const frame = data.subarray(at, at + FRAME_BYTES);
        let candidate = next;
        while (
          candidate < speechFrames.length &&
          candidate - next <= MAX_LATE_FRAMES &&
          !frame.equals(speechFrames[candidate] ?? Buffer.alloc(0))
        )
          candidate++;
        if (candidate >= speechFrames.length || candidate - next > MAX_LATE_FRAMES) continue; // a concealed frame
        matched++;
        next = candidate + 1;
      }
      expect(matched).toBe(received);
      expect(
        recording.digits.map(({ digit, source, durationMs }) => ({ digit, source, durationMs })),
      ).toEqual(
        DIGITS.map(({ digit }) => ({ digit, source: 'rtp', durationMs: DIGIT_DURATION_MS })),
      );
      // The keys came with an SSRC of their own from the caller's latched address: taken at once
      // as a side stream, the speech's stream stays latched (no SSRC change).
      expect(recording.ssrcChanges).toEqual([]);
      // Nothing was lost on loopback. The keys' own stream skips sequence numbers between presses
      // (they were cut from one call), but it is a side stream: the loss and SSRC counts are the
      // speech stream's (RFC 3550 A.3, per source), so its gaps are not counted as loss.
      const keys = wire.inbound
        .filter((p) => p.packet.payloadType === 101)
        .map((p) => p.packet.sequenceNumber);
      const expected = (((keys.at(-1) ?? 0) - (keys[0] ?? 0)) & 0xffff) + 1;
      expect(expected - keys.length).toBeGreaterThan(0);
      expect(recording.stats).toMatchObject({
        packetsIn: wire.inbound.length,
        dtmfIn: DIGITS.length,
        lost: 0,
        ssrcChanges: 0,
        relatches: 0,
      });
      expect(recording.stats?.dropped).toEqual({});
    },
  );
});
