/**
 * SRTP with a real softphone: baresip (headless, loopback, `mediaenc=srtp-mand`, its own srtp
 * module) calls a tenant whose `srtp` is `required`, in the echo media test mode, and plays a
 * 1 kHz tone. The call comes up over RTP/SAVP, callgate hears the caller (it echoes the tone
 * back, and baresip's recording holds it), and a capture on loopback shows that no RTP payload in
 * either direction is the plain tone. A plain RTP/AVP caller (sipp) to the same number gets 488
 * with the Warning "SRTP required".
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { linearToUlaw } from '../../gateway/media/g711.ts';
import { readWavFile, wavFile } from '../../gateway/media/wav-file.ts';
import { startPhone } from '../support/baresip-phone.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startCallgate } from './callgate-process.ts';
import { WireCapture, type CapturedDatagram } from './media-wire-capture.ts';
import { runSipp } from './sipp-runner.ts';

const HAVE_BARESIP = spawnSync('baresip', ['-h'], { stdio: 'ignore' }).error === undefined;
const own = closeAfterEach();

const SRTP_NUMBER = '9200';
/** A media range of its own, for the capture filter. */
const RTP_PORT_MIN = 44_000 + 100 * (process.pid % 20);
const RTP_PORT_MAX = RTP_PORT_MIN + 98;
const TONE_HZ = 1000;
/** At 8 kHz a 1 kHz tone repeats every 8 samples: its μ-law bytes do too, unless encrypted. */
const TONE_PERIOD = 8;

/** 8 kHz 16-bit: silence, then the tone (the phone's microphone). */
function toneWav(seconds: number): Buffer {
  const samples = Buffer.alloc(8000 * 2 * seconds);
  for (let n = 8000; n < 8000 * seconds; n++)
    samples.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * TONE_HZ * n) / 8000)), n * 2);
  return wavFile('pcm16', 8000, samples);
}

/** The share of a payload's bytes equal to the byte one tone period before. */
function periodicShare(payload: Buffer): number {
  let same = 0;
  for (let i = TONE_PERIOD; i < payload.length; i++)
    if (payload[i] === payload[i - TONE_PERIOD]) same++;
  return same / Math.max(1, payload.length - TONE_PERIOD);
}

/** Seconds of recording where the 1 kHz tone is most of the energy (Goertzel per 20 ms frame). */
function toneSeconds(samples: Buffer, rate: number): number {
  const frame = Math.round(rate / 50);
  const coefficient = 2 * Math.cos((2 * Math.PI * TONE_HZ) / rate);
  let frames = 0;
  for (let at = 0; at + frame * 2 <= samples.length; at += frame * 2) {
    let s1 = 0;
    let s2 = 0;
    let energy = 0;
    for (let i = 0; i < frame; i++) {
      const x = samples.readInt16LE(at + i * 2);
      energy += x * x;
      const s0 = x + coefficient * s1 - s2;
      s2 = s1;
      s1 = s0;
    }
    const tone = (s1 * s1 + s2 * s2 - coefficient * s1 * s2) / (frame / 2);
    if (energy / frame > 1e5 && tone / energy > 0.5) frames++;
  }
  return frames / 50;
}

function phoneConfig(dir: string, sipPort: number, controlPort: number): string {
  return [
    'poll_method epoll',
    'net_interface 127.0.0.1',
    `sip_listen 127.0.0.1:${sipPort}`,
    `snd_path ${dir}`,
    `audio_source aufile,${join(dir, 'tone.wav')}`,
    'audio_alert aufile,/dev/null',
    'module_path /usr/lib/baresip/modules',
    'module g711.so',
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

/** RTP datagrams (not RTCP) to or from callgate's range with a 160-byte G.711 payload or more. */
function rtpTo(datagrams: readonly CapturedDatagram[], toCallgate: boolean): CapturedDatagram[] {
  return datagrams.filter((d) => {
    const port = toCallgate ? d.destinationPort : d.sourcePort;
    const pt = (d.data[1] ?? 0) & 0x7f;
    return (
      port >= RTP_PORT_MIN &&
      port <= RTP_PORT_MAX &&
      port % 2 === 0 &&
      pt === 0 &&
      d.data.length >= 172
    );
  });
}

describe.runIf(HAVE_BARESIP || process.env.CI === 'true')(
  'when a softphone with mandatory SRTP calls a tenant that requires SRTP',
  () => {
    it(
      'should carry the call over SRTP both ways, with no plain payload on the wire, and refuse a plain caller with 488',
      { timeout: 120_000 },
      async () => {
        const cg = own(
          await startCallgate({
            script: { name: 'e2e-srtp', greeting: 'Hello.', fallback: 'Sorry?' },
            overrides: (config) => {
              config.rtp = {
                ...(config.rtp as Record<string, unknown>),
                portMin: RTP_PORT_MIN,
                portMax: RTP_PORT_MAX,
              };
              (config.tenants as Array<Record<string, unknown>>).push({
                id: 'srtp-echo',
                numbers: [SRTP_NUMBER],
                agent: 'concierge',
                trunk: { allowFrom: ['127.0.0.1/32'] },
                srtp: 'required',
                mediaTest: { mode: 'echo' },
              });
            },
          }),
        );
        const dir = mkdtempSync(join(tmpdir(), 'callgate-baresip-srtp-'));
        own({ close: () => rmSync(dir, { recursive: true, force: true }) });
        writeFileSync(join(dir, 'tone.wav'), toneWav(30));
        writeFileSync(
          join(dir, 'accounts'),
          '<sip:caller@127.0.0.1>;regint=0;mediaenc=srtp-mand\n',
        );
        const capture = await WireCapture.start(RTP_PORT_MIN, RTP_PORT_MAX);
        own({ close: () => capture.kill() });
        const { phone, control, output, exited } = await startPhone(dir, (sip, ctl) =>
          phoneConfig(dir, sip, ctl),
        );
        own({
          close: async () => {
            phone.kill('SIGKILL');
            await exited;
          },
        });
        own({ close: () => control.destroy() });
        let events = '';
        control.on('data', (d: Buffer) => (events += d.toString()));
        const command = (name: string, params = ''): void => {
          const json = JSON.stringify({ command: name, params, token: name });
          control.write(`${Buffer.byteLength(json)}:${json},`);
        };
        const explain = (error: Error): never => {
          throw new Error(
            `${error.message}\nbaresip: ${output().slice(-2_000)}\nevents: ${events.slice(-2_000)}\ncallgate: ${cg.proc.output().slice(-2_000)}`,
          );
        };

        command('dial', `sip:${SRTP_NUMBER}@127.0.0.1:${cg.sipPort}`);
        await waitFor(
          async () => (events.includes('CALL_ESTABLISHED') ? true : undefined),
          15_000,
          'the call to be established',
        ).catch(explain);
        await new Promise((resolve) => setTimeout(resolve, 6_000));
        command('hangup');
        await new Promise((resolve) => setTimeout(resolve, 500));
        const wire = await capture.stop();
        phone.kill('SIGTERM');
        await exited;

        // Both directions flowed, and no payload is the tone in the clear (which repeats itself).
        const plainTone = Buffer.from(
          Array.from({ length: 160 }, (_, n) =>
            linearToUlaw(Math.round(8000 * Math.sin((2 * Math.PI * TONE_HZ * n) / 8000))),
          ),
        );
        expect(periodicShare(plainTone)).toBe(1);
        const fromPhone = rtpTo(wire, true);
        const fromCallgate = rtpTo(wire, false);
        expect(fromPhone.length, 'RTP from the phone').toBeGreaterThan(150);
        expect(fromCallgate.length, 'RTP from callgate').toBeGreaterThan(100);
        for (const { data } of [...fromPhone, ...fromCallgate])
          expect(periodicShare(data.subarray(12, 172))).toBeLessThan(0.2);
        // What the phone heard is its own tone, echoed: callgate decrypted it and encrypted it again.
        const recording = readdirSync(dir).find((name) => name.endsWith('-dec.wav'));
        expect(recording, `baresip's recording in ${dir}`).toBeDefined();
        const wav = readWavFile(readFileSync(join(dir, recording ?? '')));
        expect(toneSeconds(wav?.data ?? Buffer.alloc(0), wav?.sampleRate ?? 8000)).toBeGreaterThan(
          3,
        );
        const metrics = await (await fetch(`${cg.httpUrl}/metrics`)).text();
        expect(metrics).not.toMatch(
          /callgate_rtp_srtp_dropped_total\{reason="srtp-auth"[^}]*\} [1-9]/,
        );

        // A plain RTP/AVP offer to the same number: 488 with the Warning.
        const plain = await runSipp({
          scenario: 'uac-rejected.xml',
          port: cg.sipPort,
          transport: 'udp',
          service: SRTP_NUMBER,
        });
        expect(plain.exitCode, plain.stderr).toBe(0);
        expect(plain.firstLines).toContain('received SIP/2.0 488 Not Acceptable Here');
        expect(plain.trace).toMatch(/Warning: 399 callgate "SRTP required"/);
      },
    );
  },
);
