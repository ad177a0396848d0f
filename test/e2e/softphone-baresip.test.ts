/**
 * A real softphone against callgate on its embedded defaults and the demo script: baresip
 * (headless, loopback only) dials the demo number, hears the greeting, presses 1 on its keypad
 * (RFC 4733, baresip's own encoder) and hears the booking confirmed. One booking is committed at
 * the sandbox, the agent's words are in baresip's recording, and the call ends on the phone's BYE.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readWavFile, wavFile } from '../../gateway/media/wav-file.ts';
import { startPhone } from '../support/baresip-phone.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { REPO_ROOT, waitFor } from '../support/processes.ts';
import { startCallgate, type OperationView, type TimelineEntryView } from './callgate-process.ts';

const HAVE_BARESIP = spawnSync('baresip', ['-h'], { stdio: 'ignore' }).error === undefined;
const own = closeAfterEach();

/** Seconds of speech in a 16-bit PCM recording: 20 ms frames whose RMS is above a quiet line. */
function voicedSeconds(samples: Buffer, rate: number): number {
  const frame = Math.round(rate / 50);
  let voiced = 0;
  for (let at = 0; at + frame * 2 <= samples.length; at += frame * 2) {
    let energy = 0;
    for (let i = 0; i < frame; i++) energy += samples.readInt16LE(at + i * 2) ** 2;
    if (Math.sqrt(energy / frame) > 300) voiced++;
  }
  return voiced / 50;
}

function phoneConfig(dir: string, sipPort: number, controlPort: number): string {
  return [
    'poll_method epoll',
    // Loopback only: the address baresip binds and puts in its SDP.
    'net_interface 127.0.0.1',
    `sip_listen 127.0.0.1:${sipPort}`,
    // What the phone hears is written by sndfile to <dir>/dump-*-dec.wav.
    `snd_path ${dir}`,
    `audio_source aufile,${join(dir, 'silence.wav')}`,
    'audio_alert aufile,/dev/null',
    'module_path /usr/lib/baresip/modules',
    'module g711.so',
    'module aufile.so',
    'module sndfile.so',
    'module_app account.so',
    'module_app menu.so',
    'module_app ctrl_tcp.so',
    `ctrl_tcp_listen 127.0.0.1:${controlPort}`,
    '',
  ].join('\n');
}

describe.runIf(HAVE_BARESIP || process.env.CI === 'true')(
  'when a softphone calls the demo number and presses 1',
  () => {
    it(
      'should hear the greeting, book one table through the keypad menu and hear it confirmed',
      { timeout: 120_000 },
      async () => {
        const script = parse(
          readFileSync(join(REPO_ROOT, 'gateway/realtime/simulator/demo-script.yaml'), 'utf8'),
        ) as Record<string, unknown>;
        const cg = own(await startCallgate({ script }));
        const dir = mkdtempSync(join(tmpdir(), 'callgate-baresip-'));
        own({ close: () => rmSync(dir, { recursive: true, force: true }) });
        // The phone's microphone: 90 s of 8 kHz 16-bit silence, so the caller says nothing.
        writeFileSync(
          join(dir, 'silence.wav'),
          wavFile('pcm16', 8000, Buffer.alloc(8000 * 2 * 90)),
        );
        writeFileSync(join(dir, 'accounts'), '<sip:caller@127.0.0.1>;regint=0\n');
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
            `${error.message}\nbaresip: ${output().slice(-2_000)}\nbaresip events: ${events.slice(-2_000)}`,
          );
        };

        command('dial', `sip:1000@127.0.0.1:${cg.sipPort}`);
        const call = await cg.activeCall(10_000).catch(explain);
        const timeline = async (): Promise<TimelineEntryView[]> =>
          (await cg.get<{ timeline: TimelineEntryView[] }>(`/v1/calls/${call.session_id}/timeline`))
            .timeline;
        await waitFor(
          async () =>
            (await timeline()).some((e) => e.type === 'response' && e.detail.state === 'created')
              ? true
              : undefined,
          10_000,
          'the greeting',
        ).catch(explain);
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        // The keypad: one press of 1, sent by the phone as RFC 4733 telephone-events.
        command('sndcode', '1');
        const booking = await waitFor(
          async () =>
            (
              await cg.get<{ operations: OperationView[] }>(
                `/v1/operations?session_id=${call.session_id}`,
              )
            ).operations.find(
              (op) => op.action === 'book_table' && op.delivery?.delivered === true,
            ),
          60_000,
          'the booking to be confirmed to the caller',
        ).catch(explain);
        command('hangup');
        await waitFor(
          async () =>
            (await cg.get<{ recent: { session_id: string }[] }>('/v1/calls')).recent.some(
              (c) => c.session_id === call.session_id,
            )
              ? true
              : undefined,
          10_000,
          'the call to end',
        ).catch(explain);

        expect(booking.state).toBe('COMMITTED');
        expect(booking.delivery).toMatchObject({ decision: 'spoken', channel: 'voice' });
        const effects = (
          await cg.get<{ effects: { reference?: string }[] }>(
            `${cg.sandboxUrl}/admin/effects?service=bookings`,
          )
        ).effects;
        expect(effects.map((e) => e.reference)).toEqual([booking.operation_id]);
        const entries = await timeline();
        // One key press, one digit, carried in RTP; the call ended by the phone.
        expect(entries.filter((e) => e.type === 'dtmf').map((e) => e.detail)).toEqual([
          { digit: '1', source: 'rtp' },
        ]);
        expect(entries.find((e) => e.type === 'ended')?.detail).toMatchObject({
          reason: 'caller_hung_up',
        });
        // What the phone played: the greeting is about 14 s of speech; the booking and its confirmation come on top.
        phone.kill('SIGTERM');
        await exited;
        const recording = readdirSync(dir).find((name) => name.endsWith('-dec.wav'));
        expect(recording, `baresip's recording in ${dir}`).toBeDefined();
        const wav = readWavFile(readFileSync(join(dir, recording ?? '')));
        expect(wav?.bitsPerSample).toBe(16);
        const heard = voicedSeconds(wav?.data ?? Buffer.alloc(0), wav?.sampleRate ?? 8000);
        expect(heard).toBeGreaterThan(18);
      },
    );
  },
);
