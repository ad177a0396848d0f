/**
 * A real wideband softphone against callgate with G.722 only: baresip (headless, loopback only,
 * its g722 module and no other codec) calls tenants that list only G722. The call negotiates
 * G722/8000 on payload type 9; the phone hears the demo greeting as speech with wideband content
 * (its own decoder's recording), and callgate hears the caller (media-test record mode keeps
 * the caller's audio as a 16 kHz WAV, compared with what the phone sent).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readWavFile } from '../../gateway/media/wav-file.ts';
import { startPhone, type Phone } from '../support/baresip-phone.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { startCallgate, type CallgateProcess, type TimelineEntryView } from './callgate-process.ts';

const HAVE_TOOLS = ['baresip', 'espeak-ng', 'sox'].every(
  (tool) => spawnSync('which', [tool], { stdio: 'ignore' }).status === 0,
);
const own = closeAfterEach();
const DEMO_NUMBER = '1000';
const RECORD_NUMBER = '9722';

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

const voicedSeconds = (levels: number[]): number => levels.filter((l) => l > 300).length / 50;

/**
 * Share of the energy above 4 kHz, by a DFT of each 20 ms frame: narrowband audio has about none,
 * speech a few percent, white noise half.
 */
function highBandShare(samples: Int16Array, rate: number): number {
  const n = Math.round(rate / 50);
  const cos = Float64Array.from({ length: n }, (_, i) => Math.cos((2 * Math.PI * i) / n));
  const sin = Float64Array.from({ length: n }, (_, i) => Math.sin((2 * Math.PI * i) / n));
  let high = 0;
  let total = 0;
  for (let at = 0; at + n <= samples.length; at += n) {
    for (let k = 1; k < n / 2; k++) {
      let re = 0;
      let im = 0;
      for (let i = 0; i < n; i++) {
        const x = samples[at + i] as number;
        const index = (k * i) % n;
        re += x * (cos[index] as number);
        im -= x * (sin[index] as number);
      }
      const power = re * re + im * im;
      total += power;
      if ((k * rate) / n >= 4000) high += power;
    }
  }
  return total === 0 ? 0 : high / total;
}

/** Pearson correlation of two level envelopes at the lag (in frames) that fits them best. */
function envelopeCorrelation(a: number[], b: number[], maxLag: number): number {
  let best = -1;
  for (let lag = 0; lag <= maxLag; lag++) {
    const length = Math.min(a.length, b.length - lag);
    if (length < 50) break;
    const x = a.slice(0, length);
    const y = b.slice(lag, lag + length);
    const mean = (v: number[]): number => v.reduce((s, e) => s + e, 0) / v.length;
    const mx = mean(x);
    const my = mean(y);
    let sxy = 0;
    let sxx = 0;
    let syy = 0;
    for (let i = 0; i < length; i++) {
      sxy += ((x[i] as number) - mx) * ((y[i] as number) - my);
      sxx += ((x[i] as number) - mx) ** 2;
      syy += ((y[i] as number) - my) ** 2;
    }
    best = Math.max(best, sxy / Math.sqrt(sxx * syy));
  }
  return best;
}

function pcmOf(file: string): { samples: Int16Array; rate: number } {
  const wav = readWavFile(readFileSync(file));
  if (wav === null || wav.bitsPerSample !== 16) throw new Error(`${file} is not 16-bit PCM`);
  const data = Buffer.from(wav.data);
  return {
    samples: new Int16Array(data.buffer, data.byteOffset, data.length >> 1),
    rate: wav.sampleRate,
  };
}

/** baresip with only the g722 codec, closed after the test. */
async function startG722Phone(dir: string, source: string): Promise<Phone> {
  writeFileSync(join(dir, 'accounts'), '<sip:caller@127.0.0.1>;regint=0\n');
  const phone = await startPhone(dir, (sipPort, controlPort) =>
    [
      'poll_method epoll',
      'net_interface 127.0.0.1',
      `sip_listen 127.0.0.1:${sipPort}`,
      `snd_path ${dir}`,
      `audio_source aufile,${source}`,
      'audio_alert aufile,/dev/null',
      'module_path /usr/lib/baresip/modules',
      'module g722.so',
      'module aufile.so',
      'module sndfile.so',
      'module_app account.so',
      'module_app menu.so',
      'module_app ctrl_tcp.so',
      `ctrl_tcp_listen 127.0.0.1:${controlPort}`,
      '',
    ].join('\n'),
  );
  own({
    close: async () => {
      phone.control.destroy();
      phone.phone.kill('SIGKILL');
      await phone.exited;
    },
  });
  return phone;
}

async function startG722Gateway(recordDir: string): Promise<CallgateProcess> {
  const cg = await startCallgate({
    script: {
      name: 'e2e-g722',
      greeting: 'Hello, this is the wideband test line. '.repeat(3),
      fallback: 'Sorry?',
    },
    overrides: (config) => {
      const tenants = config.tenants as Array<Record<string, unknown>>;
      for (const tenant of tenants) tenant.codecs = ['G722'];
      tenants.push({
        id: 'record-g722',
        numbers: [RECORD_NUMBER],
        agent: 'concierge',
        trunk: { allowFrom: ['127.0.0.1/32'] },
        codecs: ['G722'],
        mediaTest: { mode: 'record', recordDir },
      });
    },
  });
  own({ close: () => cg.stop() });
  return cg;
}

function workDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-g722-'));
  own({ close: () => rmSync(dir, { recursive: true, force: true }) });
  return dir;
}

/** A spoken sentence at 16 kHz, made by espeak-ng and sox (not by callgate). */
function speechFile(dir: string): string {
  const raw = join(dir, 'speech-raw.wav');
  const file = join(dir, 'speech.wav');
  const text =
    'Good morning. I would like to book a table for four people on Friday evening, please. Thank you very much.';
  expect(spawnSync('espeak-ng', ['-w', raw, text]).status).toBe(0);
  expect(
    spawnSync('sox', [raw, '-r', '16000', '-c', '1', '-b', '16', file, 'pad', '0.5', '3']).status,
  ).toBe(0);
  return file;
}

describe.runIf(HAVE_TOOLS || process.env.CI === 'true')(
  'when a G.722-only softphone calls a G722 tenant',
  () => {
    it(
      'should negotiate G722/8000 and let the phone hear the greeting as wideband speech',
      { timeout: 90_000 },
      async () => {
        const dir = workDir();
        const cg = await startG722Gateway(join(dir, 'recordings'));
        const silence = join(dir, 'silence.wav');
        spawnSync('sox', ['-n', '-r', '16000', '-c', '1', '-b', '16', silence, 'trim', '0', '60']);
        const phone = await startG722Phone(dir, silence);
        const explain = (error: Error): never => {
          throw new Error(`${error.message}\nbaresip: ${phone.output().slice(-2_000)}`);
        };
        phone.command('dial', `sip:${DEMO_NUMBER}@127.0.0.1:${cg.sipPort}`);
        const call = await cg.activeCall(10_000).catch(explain);
        const timeline = (): Promise<TimelineEntryView[]> => cg.timeline(call.session_id);
        await waitFor(
          async () =>
            (await timeline()).some((e) => e.type === 'response' && e.detail.state === 'created')
              ? true
              : undefined,
          10_000,
          'the greeting',
        ).catch(explain);
        await new Promise((resolve) => setTimeout(resolve, 6_000));
        phone.command('hangup');
        await waitFor(
          async () => ((await timeline()).some((e) => e.type === 'ended') ? true : undefined),
          10_000,
          'the call to end',
        ).catch(explain);
        const answered = (await timeline()).find((e) => e.type === 'answered');
        expect(answered?.detail).toMatchObject({ codec: 'G722', passthrough: false });
        phone.phone.kill('SIGTERM');
        await phone.exited;
        // baresip names codecs by their audio rate: G.722 decodes at 16 kHz.
        expect(phone.output()).toMatch(/Set audio decoder: G722 16000Hz/);

        const recording = readdirSync(dir).find((name) => name.endsWith('-dec.wav'));
        expect(recording, `baresip's recording in ${dir}`).toBeDefined();
        const { samples, rate } = pcmOf(join(dir, recording ?? ''));
        // The phone's G.722 decoder plays 16 kHz audio.
        expect(rate).toBe(16000);
        const levels = frameLevels(samples, rate);
        // Speech, not silence: seconds of voiced frames; and not noise: it pauses between words.
        expect(voicedSeconds(levels)).toBeGreaterThan(3);
        const voiced = levels.filter((l) => l > 300);
        const quietGaps = levels.slice(levels.findIndex((l) => l > 300)).filter((l) => l < 100);
        expect(quietGaps.length, 'pauses between words').toBeGreaterThan(10);
        expect(voiced.length).toBeGreaterThan(0);
        // Wideband: energy above 4 kHz that G.711 could not carry, far below the half of noise.
        const share = highBandShare(samples.subarray(0, Math.min(samples.length, rate * 8)), rate);
        expect(share).toBeGreaterThan(0.002);
        expect(share).toBeLessThan(0.25);
      },
    );

    it(
      'should hear the caller: the 16 kHz recording follows what the phone said',
      { timeout: 90_000 },
      async () => {
        const dir = workDir();
        const recordDir = join(dir, 'recordings');
        const cg = await startG722Gateway(recordDir);
        const source = speechFile(dir);
        const sent = pcmOf(source);
        const phone = await startG722Phone(dir, source);
        phone.command('dial', `sip:${RECORD_NUMBER}@127.0.0.1:${cg.sipPort}`);
        const sentSeconds = sent.samples.length / sent.rate;
        await new Promise((resolve) => setTimeout(resolve, (sentSeconds + 2) * 1000));
        phone.command('hangup');
        const json = await waitFor(
          async () =>
            readdirSync(recordDir, { withFileTypes: true }).find((e) => e.name.endsWith('.json'))
              ?.name,
          10_000,
          'the recording',
        ).catch((error: Error) => {
          throw new Error(`${error.message}\nbaresip: ${phone.output().slice(-2_000)}`);
        });
        const recording = JSON.parse(readFileSync(join(recordDir, json), 'utf8')) as {
          codec: string;
          audio: { file: string; sampleRate: number; encoding: string };
        };
        expect(recording.codec).toBe('G722');
        expect(recording.audio).toMatchObject({ encoding: 'pcm16', sampleRate: 16000 });
        const heard = pcmOf(join(recordDir, recording.audio.file));
        expect(heard.rate).toBe(16000);
        const sentLevels = frameLevels(sent.samples, sent.rate);
        const heardLevels = frameLevels(heard.samples, heard.rate);
        expect(voicedSeconds(heardLevels)).toBeGreaterThan(voicedSeconds(sentLevels) * 0.8);
        // The same words: the loudness envelope follows the sent one (lag: call setup, jitter buffer).
        expect(envelopeCorrelation(sentLevels, heardLevels, 150)).toBeGreaterThan(0.8);
        const sentShare = highBandShare(sent.samples, sent.rate);
        const heardShare = highBandShare(heard.samples, heard.rate);
        expect(heardShare).toBeGreaterThan(sentShare * 0.5);
        expect(heardShare).toBeLessThan(sentShare * 2);
      },
    );
  },
);
