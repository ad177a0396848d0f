import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { registry } from '../../../config/metrics.ts';
import { PCMU } from '../../../gateway/media/audio-format.ts';
import { MonotonicMediaTimer } from '../../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import { RtpSession } from '../../../gateway/media/rtp-session.ts';
import { RtpPeer, sleep, waitFor } from './rtp-peer.ts';

const PORT_BASE = 48000 + 2 * ((process.pid * 53) % 2000);
const cleanup: Array<{ close(): Promise<void> }> = [];

afterEach(async () => {
  for (const item of cleanup.splice(0)) await item.close();
});

/** Sum of a metric's samples with these labels; `sample` picks e.g. a histogram's `_count`. */
async function metricValue(
  name: string,
  labels: Record<string, string> = {},
  sample = name,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const data = await metric.get();
  return data.values
    .filter(
      (v) =>
        ('metricName' in v && typeof v.metricName === 'string' ? v.metricName : name) === sample,
    )
    .filter((v) =>
      Object.entries(labels).every(
        ([k, value]) => (v.labels as Record<string, unknown>)[k] === value,
      ),
    )
    .reduce((sum, v) => sum + v.value, 0);
}

describe('when a call carries media', () => {
  it(
    'should add its packets, bytes, losses, drops and digits to the process metrics and its own stats',
    { retry: 2 },
    async () => {
      const before = {
        in: await metricValue('callgate_rtp_packets_total', { direction: 'in' }),
        out: await metricValue('callgate_rtp_packets_total', { direction: 'out' }),
        lost: await metricValue('callgate_rtp_lost_packets_total'),
        dropped: await metricValue('callgate_rtp_dropped_packets_total', {
          reason: 'unknown-payload-type',
        }),
        dtmf: await metricValue('callgate_dtmf_events_total', {
          direction: 'in',
          source: 'sip-info',
        }),
      };
      const peer = await RtpPeer.open();
      cleanup.push(peer);
      const session = await RtpSession.open({
        config: {
          listen: '127.0.0.1',
          portMin: PORT_BASE,
          portMax: PORT_BASE + 9,
          mediaTimeoutMs: 5000,
          comfortSilence: false,
          stallCutMs: 2000,
          jitterMinMs: 20,
          jitterMaxMs: 200,
          sockets: 'auto',
        },
        ports: new RtpPortAllocator({ portMin: PORT_BASE, portMax: PORT_BASE + 9 }),
        scheduler: new PlayoutScheduler({ timer: new MonotonicMediaTimer() }),
        timer: new MonotonicMediaTimer(),
        codec: PCMU,
        model: { encoding: 'pcmu' },
        remote: { address: '127.0.0.1', port: peer.port },
        logger: new Logger({ level: 'error', sink: { write: () => {} } }),
      });
      cleanup.push(session);
      for (let i = 0; i < 20; i++) {
        // Every fifth packet is lost on the way.
        if (i % 5 !== 2)
          peer.send(
            {
              payloadType: 0,
              sequenceNumber: i,
              timestamp: i * 160,
              ssrc: 7,
              payload: Buffer.alloc(160, 0xff),
            },
            session.localPort,
          );
        await sleep(20);
      }
      peer.send(
        { payloadType: 99, sequenceNumber: 21, timestamp: 0, ssrc: 7, payload: Buffer.alloc(10) },
        session.localPort,
      );
      session.injectDigit('5');
      session.play('item', Buffer.alloc(160 * 10, 0x7f));
      await waitFor(() => peer.packets().length >= 10);
      await sleep(60);
      const stats = session.stats();
      await session.close();
      expect(stats).toMatchObject({ packetsIn: 17, packetsOut: 10, lost: 4, dtmfIn: 1 });
      expect(stats.bytesIn).toBe(16 * 172 + 22);
      expect(stats.playoutLatenessMeanMs).toBeLessThan(20);
      expect(
        (await metricValue('callgate_rtp_packets_total', { direction: 'in' })) - before.in,
      ).toBe(17);
      expect(
        (await metricValue('callgate_rtp_packets_total', { direction: 'out' })) - before.out,
      ).toBe(10);
      expect((await metricValue('callgate_rtp_lost_packets_total')) - before.lost).toBe(4);
      expect(
        (await metricValue('callgate_rtp_dropped_packets_total', {
          reason: 'unknown-payload-type',
        })) - before.dropped,
      ).toBe(1);
      expect(
        (await metricValue('callgate_dtmf_events_total', { direction: 'in', source: 'sip-info' })) -
          before.dtmf,
      ).toBe(1);
      expect(
        await metricValue(
          'callgate_rtp_playout_lateness_seconds',
          {},
          'callgate_rtp_playout_lateness_seconds_count',
        ),
      ).toBeGreaterThanOrEqual(10);
    },
  );
});
