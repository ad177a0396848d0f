/**
 * SIP over TLS with a real softphone: baresip (headless, loopback only) dials callgate's TLS
 * listener (`;transport=tls`, the test CA as its `sip_cafile`) with mandatory SRTP, to tenants that
 * require SRTP: one on G.711 μ-law, one on G.722 only. Each phone hears the greeting as speech,
 * presses 1 (RFC 4733, inside SRTP) and hangs up; a capture on loopback shows only TLS records on
 * the TLS port and no plain RTP payload. A call callgate ends (its shutdown) gets its BYE on the
 * phone's own connection. A phone presenting a certificate of a CA a mutual-TLS tenant does not
 * trust gets 403 and no call, and a TLS client that does not trust callgate's certificate gets
 * no further than the handshake.
 *
 * Debian's baresip 1.0.0 does not verify the certificate of the server it dials (`sip_cafile` only
 * adds a CA; it sends its INVITE to a server whose certificate chains to no CA it knows), so the
 * refusal of callgate's certificate by its peer is shown with openssl s_client.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linearToUlaw } from '../../gateway/media/g711.ts';
import { wavFile } from '../../gateway/media/wav-file.ts';
import { startPhone, type Phone } from '../support/baresip-phone.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { makeTestPki, type TestPki } from '../support/tls-certs.ts';
import { startCallgate, type CallgateProcess, type TimelineEntryView } from './callgate-process.ts';
import { WireCapture, type CapturedDatagram } from './media-wire-capture.ts';

const HAVE_TOOLS = ['baresip', 'dumpcap', 'tshark', 'openssl'].every(
  (tool) => spawnSync('which', [tool], { stdio: 'ignore' }).status === 0,
);
const own = closeAfterEach();

const PCMU_NUMBER = '9461';
const G722_NUMBER = '9462';
const MUTUAL_NUMBER = '9463';
/** A media range of its own, for the capture filter. */
const RTP_PORT_MIN = 42_000 + 100 * (process.pid % 20);
const RTP_PORT_MAX = RTP_PORT_MIN + 98;
const GREETING =
  'Hello, this is the secure test line. Your call is encrypted from end to end. How can I help you today?';

// ---- the phone's microphone and what it heard ----

const TONE_HZ = 1000;
/** At 8 kHz a 1 kHz tone repeats every 8 samples: its μ-law bytes do too, unless encrypted. */
const TONE_PERIOD = 8;
/** Far below the simulator's voice threshold (-35 dBFS, RMS 580): the agent does not hear a caller speak. */
const TONE_AMPLITUDE = 200;

/** 8 kHz 16-bit: a quiet 1 kHz tone for `seconds`, exactly periodic. */
function quietToneWav(seconds: number): Buffer {
  const samples = Buffer.alloc(8000 * 2 * seconds);
  for (let n = 0; n < 8000 * seconds; n++) samples.writeInt16LE(toneSample(n), n * 2);
  return wavFile('pcm16', 8000, samples);
}

function toneSample(n: number): number {
  return Math.round(TONE_AMPLITUDE * Math.sin((2 * Math.PI * TONE_HZ * n) / 8000));
}

/** 20 ms frame energies (RMS) of 16-bit PCM. */
function frameLevels(samples: Int16Array, rate: number): number[] {
  const frame = Math.round(rate / 50);
  const levels: number[] = [];
  for (let at = 0; at + frame <= samples.length; at += frame) {
    let energy = 0;
    for (let i = 0; i < frame; i++) energy += (samples[at + i] as number) ** 2;
    levels.push(Math.sqrt(energy / frame));
  }
  return levels;
}

/** Seconds of speech a phone must have heard of the greeting (about 5 s of it is voiced). */
const SPEECH_SECONDS = 3;

const voicedSeconds = (levels: number[]): number => levels.filter((l) => l > 300).length / 50;

/** Quiet frames after the first voiced one: the pauses between words that noise does not have. */
function quietFramesAfterVoice(levels: number[]): number {
  const firstVoiced = levels.findIndex((l) => l > 300);
  return firstVoiced < 0 ? 0 : levels.slice(firstVoiced).filter((l) => l < 100).length;
}

/**
 * What the phone has played so far: its decoder's recording (sndfile's `*-dec.wav`), read while
 * it is still being written (its header's sizes are final only at the end).
 */
function heardSoFar(dir: string): { samples: Int16Array; rate: number } {
  const name = readdirSync(dir).find((file) => file.endsWith('-dec.wav'));
  if (name === undefined) return { samples: new Int16Array(0), rate: 8000 };
  const file = readFileSync(join(dir, name));
  const data = file.indexOf('data', 12, 'latin1');
  if (data < 0 || file.length < 28) return { samples: new Int16Array(0), rate: 8000 };
  const pcm = Buffer.from(file.subarray(data + 8, data + 8 + ((file.length - data - 8) & ~1)));
  return {
    samples: new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1),
    rate: file.readUInt32LE(24),
  };
}

// ---- the wire ----

/** RTP datagrams (not RTCP) of one payload type to or from callgate's range, 20 ms of audio or more. */
function mediaPackets(
  wire: readonly CapturedDatagram[],
  payloadType: number,
  toCallgate: boolean,
): CapturedDatagram[] {
  return wire.filter((d) => {
    const port = toCallgate ? d.destinationPort : d.sourcePort;
    return (
      d.protocol === 'udp' &&
      port >= RTP_PORT_MIN &&
      port <= RTP_PORT_MAX &&
      port % 2 === 0 &&
      ((d.data[1] ?? 0) & 0x7f) === payloadType &&
      d.data.length >= 12 + 160
    );
  });
}

/** The share of a payload's bytes equal to the byte one tone period before. */
function periodicShare(payload: Buffer): number {
  let same = 0;
  for (let i = TONE_PERIOD; i < payload.length; i++)
    if (payload[i] === payload[i - TONE_PERIOD]) same++;
  return same / Math.max(1, payload.length - TONE_PERIOD);
}

/**
 * The most frequent byte value's count over the count every value would have if bytes were
 * uniform: ciphertext stays near 1 (under 1.5 for thousands of bytes), coded audio does not
 * (silence is one byte repeated, speech clusters around small amplitudes).
 */
function byteSkew(payloads: readonly Buffer[]): number {
  const counts = new Array<number>(256).fill(0);
  let total = 0;
  for (const payload of payloads)
    for (const byte of payload) {
      counts[byte] = (counts[byte] ?? 0) + 1;
      total++;
    }
  return Math.max(...counts) / Math.max(1, total / 256);
}

/** TCP segments with a payload to or from `port`, by the other end's port (one per connection). */
function streamsOf(
  wire: readonly CapturedDatagram[],
  port: number,
): Map<number, CapturedDatagram[]> {
  const streams = new Map<number, CapturedDatagram[]>();
  for (const segment of wire) {
    if (segment.protocol !== 'tcp' || segment.data.length === 0) continue;
    if (segment.sourcePort !== port && segment.destinationPort !== port) continue;
    const peer = segment.sourcePort === port ? segment.destinationPort : segment.sourcePort;
    streams.set(peer, [...(streams.get(peer) ?? []), segment]);
  }
  return streams;
}

/** Connections opened (SYN without ACK) to `port`. */
const connectionsTo = (wire: readonly CapturedDatagram[], port: number): number =>
  wire.filter(
    (d) => d.protocol === 'tcp' && (d.tcpFlags & 0x12) === 0x02 && d.destinationPort === port,
  ).length;

const TLS_HANDSHAKE = 0x16;
const TLS_APPLICATION_DATA = 0x17;
const isTlsRecord = (data: Buffer, type: number): boolean => data[0] === type && data[1] === 0x03;

/**
 * Each connection to the TLS port, both ways: it opens with a TLS handshake record, carries
 * application data records, and no byte of it reads as SIP.
 */
function expectTlsOnly(wire: readonly CapturedDatagram[], tlsPort: number): void {
  for (const [peer, segments] of streamsOf(wire, tlsPort)) {
    for (const fromCallgate of [true, false]) {
      const side = segments.filter((s) => (s.sourcePort === tlsPort) === fromCallgate);
      const label = `${fromCallgate ? 'from' : 'to'} callgate on the connection of port ${peer}`;
      expect(side.length, label).toBeGreaterThan(0);
      expect(isTlsRecord(side[0]?.data ?? Buffer.alloc(0), TLS_HANDSHAKE), label).toBe(true);
      expect(
        side.some((s) => isTlsRecord(s.data, TLS_APPLICATION_DATA)),
        label,
      ).toBe(true);
      const bytes = Buffer.concat(side.map((s) => s.data)).toString('latin1');
      expect(bytes, label).not.toContain('SIP/2.0');
      expect(bytes, label).not.toContain('INVITE sip:');
    }
  }
}

// ---- callgate and the phones ----

let pki: TestPki;
let cg: CallgateProcess;
let tlsPort = 0;

/** The TLS listener's port, from the "sip listening" line (it listens on port 0). */
function tlsPortFrom(stdout: string): number {
  const line = stdout.split('\n').find((text) => text.includes('sip listening'));
  const port = (JSON.parse(line ?? '{}') as { tls?: number }).tls;
  if (port === undefined) throw new Error('no TLS port in the "sip listening" line');
  return port;
}

/** The sum of a metric's series whose labels include `labels` (all of them when empty). */
async function metric(name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${cg.httpUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(labels))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

interface ListedCall {
  readonly session_id: string;
  readonly tenant_id: string;
  readonly called_number: string;
  readonly end_reason?: string;
}

async function calls(): Promise<{ active: ListedCall[]; recent: ListedCall[] }> {
  return cg.get<{ active: ListedCall[]; recent: ListedCall[] }>('/v1/calls');
}

const timeline = (sessionId: string): Promise<TimelineEntryView[]> => cg.timeline(sessionId);

interface TlsPhone extends Phone {
  readonly dir: string;
  /** baresip's SIP port (UDP and TCP); it listens for TLS on the port above. */
  readonly sipPort: number;
  /** The control connection's events and answers so far. */
  events(): string;
  dial(number: string): void;
  /** Rethrows a failed wait with what baresip and callgate printed. */
  explain(error: Error): never;
}

interface TlsPhoneOptions {
  readonly user: string;
  readonly codec: 'g711' | 'g722';
  /** Written as the phone's microphone (a WAV). */
  readonly microphone: Buffer;
  /** A PEM file with the certificate and key the phone presents (mutual TLS). */
  readonly certificate?: string;
}

function phoneConfig(
  dir: string,
  options: TlsPhoneOptions,
  sipPort: number,
  controlPort: number,
): string {
  return [
    'poll_method epoll',
    'net_interface 127.0.0.1',
    `sip_listen 127.0.0.1:${sipPort}`,
    `sip_cafile ${pki.caCert}`,
    ...(options.certificate !== undefined ? [`sip_certificate ${options.certificate}`] : []),
    `snd_path ${dir}`,
    `audio_source aufile,${join(dir, 'microphone.wav')}`,
    'audio_alert aufile,/dev/null',
    'module_path /usr/lib/baresip/modules',
    `module ${options.codec}.so`,
    'module aufile.so',
    'module sndfile.so',
    'module srtp.so',
    'module_app account.so',
    'module_app menu.so',
    'module_app ctrl_tcp.so',
    `ctrl_tcp_listen 127.0.0.1:${controlPort}`,
    '',
  ].join('\n');
}

/** A baresip with SRTP mandatory that trusts the test CA, closed after the test. */
async function startTlsPhone(options: TlsPhoneOptions): Promise<TlsPhone> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-baresip-tls-'));
  own({ close: () => rmSync(dir, { recursive: true, force: true }) });
  writeFileSync(join(dir, 'microphone.wav'), options.microphone);
  writeFileSync(
    join(dir, 'accounts'),
    `<sip:${options.user}@127.0.0.1>;regint=0;mediaenc=srtp-mand\n`,
  );
  let sipPort = 0;
  const phone = await startPhone(dir, (sip, control) => {
    sipPort = sip;
    return phoneConfig(dir, options, sip, control);
  });
  own({
    close: async () => {
      phone.control.destroy();
      phone.phone.kill('SIGKILL');
      await phone.exited;
    },
  });
  let events = '';
  phone.control.on('data', (d: Buffer) => (events += d.toString()));
  return {
    ...phone,
    dir,
    sipPort,
    events: () => events,
    dial: (number) => phone.command('dial', `sip:${number}@127.0.0.1:${tlsPort};transport=tls`),
    explain: (error) => {
      throw new Error(
        `${error.message}\nbaresip: ${phone.output().slice(-2_000)}\nevents: ${events.slice(-1_500)}\ncallgate: ${cg.proc.output().slice(-2_000)}`,
      );
    },
  };
}

/** A request callgate answers on any connection it reads one from. */
const OPTIONS_REQUEST = [
  `OPTIONS sip:${MUTUAL_NUMBER}@127.0.0.1 SIP/2.0`,
  'Via: SIP/2.0/TLS 127.0.0.1:9;branch=z9hG4bK-untrusting-client',
  'Max-Forwards: 70',
  'From: <sip:untrusting@127.0.0.1>;tag=untrusting',
  `To: <sip:${MUTUAL_NUMBER}@127.0.0.1>`,
  'Call-ID: untrusting-client',
  'CSeq: 1 OPTIONS',
  'Content-Length: 0',
  '',
  '',
].join('\r\n');

/** The certificate and key of a PEM pair in one file, as baresip's `sip_certificate` reads it. */
function certificateFile(pair: { cert: string; key: string }, name: string): string {
  const file = join(pki.dir, `${name}-baresip.pem`);
  writeFileSync(file, readFileSync(pair.cert, 'utf8') + readFileSync(pair.key, 'utf8'));
  return file;
}

const silence16k = (): Buffer => wavFile('pcm16', 16000, Buffer.alloc(16000 * 2 * 30));

/** The phone's call: up, greeting heard as speech, 1 pressed and seen, hung up by the phone. */
async function callHearPressHangUp(
  phone: TlsPhone,
  number: string,
): Promise<{ entries: TimelineEntryView[] }> {
  phone.dial(number);
  const call = await waitFor(
    async () => (await calls()).active.find((c) => c.called_number === number),
    15_000,
    `the call to ${number}`,
  ).catch((error: Error) => phone.explain(error));
  await waitFor(
    async () => {
      const { samples, rate } = heardSoFar(phone.dir);
      return voicedSeconds(frameLevels(samples, rate)) > SPEECH_SECONDS ? true : undefined;
    },
    20_000,
    `${SPEECH_SECONDS} s of the greeting heard on ${number}`,
  ).catch((error: Error) => phone.explain(error));
  phone.command('sndcode', '1');
  await waitFor(
    async () =>
      (await timeline(call.session_id)).some((e) => e.type === 'dtmf') ? true : undefined,
    10_000,
    `the digit on ${number}`,
  ).catch((error: Error) => phone.explain(error));
  phone.command('hangup');
  await waitFor(
    async () =>
      (await timeline(call.session_id)).some((e) => e.type === 'ended') ? true : undefined,
    10_000,
    `the call to ${number} to end`,
  ).catch((error: Error) => phone.explain(error));
  return { entries: await timeline(call.session_id) };
}

describe.runIf(HAVE_TOOLS || process.env.CI === 'true')(
  'when a softphone calls over TLS with mandatory SRTP',
  () => {
    beforeAll(async () => {
      pki = makeTestPki();
      cg = await startCallgate({
        script: { name: 'e2e-tls', greeting: GREETING, fallback: 'Sorry?' },
        overrides: (config) => {
          config.sip = {
            ...(config.sip as Record<string, unknown>),
            transports: ['udp', 'tcp', 'tls'],
            tlsPort: 0,
            tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
          };
          config.rtp = {
            ...(config.rtp as Record<string, unknown>),
            portMin: RTP_PORT_MIN,
            portMax: RTP_PORT_MAX,
          };
          const tenants = config.tenants as Array<Record<string, unknown>>;
          // The demo tenant's agents and actions, on numbers of their own that require SRTP.
          const tenant = (id: string, number: string, extra: Record<string, unknown>) => ({
            ...tenants[0],
            id,
            numbers: [number],
            srtp: 'required',
            ...extra,
          });
          const loopback = { allowFrom: ['127.0.0.1/32'] };
          tenants.push(
            tenant('tls-pcmu', PCMU_NUMBER, { trunk: loopback, codecs: ['PCMU'] }),
            tenant('tls-g722', G722_NUMBER, { trunk: loopback, codecs: ['G722'] }),
            tenant('tls-mutual', MUTUAL_NUMBER, {
              codecs: ['PCMU'],
              tls: { caFile: pki.caCert, name: 'trunk.example', mutual: true },
            }),
          );
        },
      });
      tlsPort = tlsPortFrom(cg.proc.stdout());
    });

    afterAll(async () => {
      await cg?.stop();
      pki?.close();
    });

    it(
      'should carry a G.711 and a G.722 call over TLS and SRTP: greeting heard, digit seen, hung up, nothing plain on the wire',
      { timeout: 60_000 },
      async () => {
        const capture = await WireCapture.start(RTP_PORT_MIN, RTP_PORT_MAX, {
          tcpPorts: [tlsPort],
        });
        own({ close: () => capture.kill() });
        const narrow = await startTlsPhone({
          user: 'narrowband',
          codec: 'g711',
          microphone: quietToneWav(30),
        });
        const wide = await startTlsPhone({
          user: 'wideband',
          codec: 'g722',
          microphone: silence16k(),
        });
        const [pcmu, g722] = await Promise.all([
          callHearPressHangUp(narrow, PCMU_NUMBER),
          callHearPressHangUp(wide, G722_NUMBER),
        ]);
        const wire = await capture.stop();

        for (const [call, codec] of [
          [pcmu, 'PCMU'],
          [g722, 'G722'],
        ] as const) {
          expect(call.entries.find((e) => e.type === 'answered')?.detail).toMatchObject({ codec });
          // One key press, one digit, carried in (S)RTP; the call ended by the phone.
          expect(call.entries.filter((e) => e.type === 'dtmf').map((e) => e.detail)).toEqual([
            { digit: '1', source: 'rtp' },
          ]);
          expect(call.entries.find((e) => e.type === 'ended')?.detail).toMatchObject({
            reason: 'caller_hung_up',
          });
        }
        for (const tenant of ['tls-pcmu', 'tls-g722'])
          expect(await metric('callgate_calls_active', `tenant="${tenant}"`), tenant).toBe(0);

        // What each phone heard: speech (seconds of it), not noise (it pauses between words).
        for (const [phone, rate] of [
          [narrow, 8000],
          [wide, 16000],
        ] as const) {
          const heard = heardSoFar(phone.dir);
          expect(heard.rate).toBe(rate);
          const levels = frameLevels(heard.samples, heard.rate);
          expect(voicedSeconds(levels)).toBeGreaterThan(SPEECH_SECONDS);
          expect(quietFramesAfterVoice(levels), 'pauses between words').toBeGreaterThan(10);
        }

        // SIP: one connection per phone to the TLS port, TLS records only, both ways.
        expect(connectionsTo(wire, tlsPort)).toBe(2);
        expect(streamsOf(wire, tlsPort).size).toBe(2);
        expectTlsOnly(wire, tlsPort);

        // Media: SRTP both ways (each packet carries an authentication tag), nothing readable.
        const plainTone = Buffer.from(
          Array.from({ length: 160 }, (_, n) => linearToUlaw(toneSample(n))),
        );
        expect(periodicShare(plainTone), 'the tone in the clear repeats itself').toBe(1);
        expect(byteSkew([plainTone]), 'the tone in the clear is skewed').toBeGreaterThan(4);
        for (const [payloadType, label] of [
          [0, 'PCMU'],
          [9, 'G722'],
        ] as const) {
          const fromPhone = mediaPackets(wire, payloadType, true);
          const fromCallgate = mediaPackets(wire, payloadType, false);
          expect(fromPhone.length, `${label} from the phone`).toBeGreaterThan(100);
          expect(fromCallgate.length, `${label} from callgate`).toBeGreaterThan(100);
          for (const packets of [fromPhone, fromCallgate]) {
            for (const { data } of packets)
              expect(data.length).toBeGreaterThanOrEqual(12 + 160 + 4);
            expect(byteSkew(packets.map((p) => p.data.subarray(12, 172))), label).toBeLessThan(1.6);
          }
          if (payloadType === 0)
            for (const { data } of fromPhone)
              expect(periodicShare(data.subarray(12, 172))).toBeLessThan(0.2);
        }
        expect(
          await metric('callgate_rtp_srtp_dropped_total', 'reason="srtp-auth"'),
          'SRTP packets that failed authentication',
        ).toBe(0);
      },
    );

    it(
      'should refuse a phone whose certificate the tenant does not trust, and a client that does not trust callgate',
      { timeout: 30_000 },
      async () => {
        // baresip with a client certificate of another CA, to the tenant that authenticates by mutual TLS.
        const impostor = await startTlsPhone({
          user: 'impostor',
          codec: 'g711',
          microphone: quietToneWav(10),
          certificate: certificateFile(
            { cert: pki.wrongClientCert, key: pki.wrongClientKey },
            'wrong-client',
          ),
        });
        impostor.dial(MUTUAL_NUMBER);
        await waitFor(
          async () => (/CALL_CLOSED[^}]*403/.test(impostor.events()) ? true : undefined),
          10_000,
          'the call to be refused with 403',
        ).catch((error: Error) => impostor.explain(error));
        const listed = await calls();
        expect(
          [...listed.active, ...listed.recent].filter((c) => c.tenant_id === 'tls-mutual'),
        ).toEqual([]);
        expect(impostor.events()).not.toContain('CALL_ESTABLISHED');

        // The same call with the trunk's own certificate is taken.
        const trunk = await startTlsPhone({
          user: 'trunk',
          codec: 'g711',
          microphone: quietToneWav(10),
          certificate: certificateFile({ cert: pki.clientCert, key: pki.clientKey }, 'client'),
        });
        trunk.dial(MUTUAL_NUMBER);
        await waitFor(
          async () => (trunk.events().includes('CALL_ESTABLISHED') ? true : undefined),
          10_000,
          'the trunk call to be established',
        ).catch((error: Error) => trunk.explain(error));
        trunk.command('hangup');
        await waitFor(
          async () => (trunk.events().includes('CALL_CLOSED') ? true : undefined),
          10_000,
          'the trunk call to end',
        ).catch((error: Error) => trunk.explain(error));

        // A client that trusts only another CA ends the handshake: counted, and its OPTIONS never
        // reaches callgate (which would answer it).
        const before = await metric(
          'callgate_sip_tls_handshake_failures_total',
          'direction="inbound"',
        );
        const responsesBefore = await metric('callgate_sip_responses_total');
        const client = await new Promise<{ code: number | null; output: string }>((resolve) => {
          const child = execFile(
            'openssl',
            [
              's_client',
              '-connect',
              `127.0.0.1:${tlsPort}`,
              '-CAfile',
              pki.wrongCaCert,
              '-verify_return_error',
              '-quiet',
            ],
            { timeout: 10_000 },
            (error, stdout, stderr) =>
              resolve({
                code: error === null ? 0 : (child.exitCode ?? 1),
                output: stdout + stderr,
              }),
          );
          child.stdin?.end(OPTIONS_REQUEST);
        });
        expect(client.code, client.output).not.toBe(0);
        expect(client.output).toMatch(/verify error|certificate verify failed/i);
        await waitFor(
          async () =>
            (await metric('callgate_sip_tls_handshake_failures_total', 'direction="inbound"')) >
            before
              ? true
              : undefined,
          5_000,
          'the handshake failure to be counted',
        );
        expect(await metric('callgate_sip_responses_total')).toBe(responsesBefore);
      },
    );

    it(
      "should send callgate's BYE on the phone's own TLS connection when callgate ends the call",
      { timeout: 30_000 },
      async () => {
        // Every connection opened on loopback is in the capture: one callgate opened to the phone too.
        const capture = await WireCapture.start(RTP_PORT_MIN, RTP_PORT_MAX, {
          tcpPorts: [tlsPort],
          tcpConnections: true,
        });
        own({ close: () => capture.kill() });
        const phone = await startTlsPhone({
          user: 'stays',
          codec: 'g711',
          microphone: quietToneWav(30),
        });
        phone.dial(PCMU_NUMBER);
        await waitFor(
          async () => (phone.events().includes('CALL_ESTABLISHED') ? true : undefined),
          10_000,
          'the call to be established',
        ).catch((error: Error) => phone.explain(error));
        await waitFor(
          async () => (await calls()).active.find((c) => c.called_number === PCMU_NUMBER),
          5_000,
          'the call in the registry',
        );
        // callgate shuts down: it ends its calls itself, each with a BYE.
        const stopping = Date.now();
        await cg.stop();
        await waitFor(
          async () => (phone.events().includes('CALL_CLOSED') ? true : undefined),
          5_000,
          'the phone to end the call',
        ).catch((error: Error) => phone.explain(error));
        const wire = await capture.stop();

        const ended = cg.proc
          .stdout()
          .split('\n')
          .filter((line) => line.includes('"call ended"'))
          .map((line) => JSON.parse(line) as { reason?: string });
        expect(ended.map((line) => line.reason)).toContain('shutdown');
        // baresip ends a session on a BYE it received with ECONNRESET ("Connection reset by peer").
        expect(phone.output()).toMatch(/session closed: Connection reset by peer/);
        expect(connectionsTo(wire, tlsPort)).toBe(1);
        expect(connectionsTo(wire, phone.sipPort) + connectionsTo(wire, phone.sipPort + 1)).toBe(0);
        const [connection] = [...streamsOf(wire, tlsPort).values()];
        expect(
          connection?.some(
            (s) =>
              s.sourcePort === tlsPort &&
              s.atMs >= stopping &&
              isTlsRecord(s.data, TLS_APPLICATION_DATA),
          ),
          'a TLS record from callgate after its shutdown began (the BYE)',
        ).toBe(true);
        expectTlsOnly(wire, tlsPort);
      },
    );
  },
);
