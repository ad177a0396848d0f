/**
 * Where a session's RTCP reports go, and what a re-INVITE or a followed source does to its
 * counts, over real UDP: reports follow the caller's own RTCP source (symmetric RTCP, as through
 * a NAT), never a stranger's, and need no port above 65535; a stream that starts over with a new
 * SSRC after a re-INVITE loses none of its audio; the drop counter published to Prometheus never
 * counts a packet twice.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { registry } from '../../../config/metrics.ts';
import { MonotonicMediaTimer } from '../../../gateway/media/media-timer.ts';
import { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import { parseRtcpCompound, serializeRtcpReport } from '../../../gateway/media/rtcp-packet.ts';
import { RELATCH_AFTER_SILENCE_MS } from '../../../gateway/media/rtp-session.ts';
import { RtpSessionHarness, audioEvents, stream } from './rtp-session-harness.ts';
import { sleep, waitFor } from './rtp-peer.ts';

const harness = new RtpSessionHarness(5);
afterEach(() => harness.closeAll());

const CALLER_SSRC = 0xcafe;

function senderReport(ssrc: number): Buffer {
  return serializeRtcpReport({
    ssrc,
    cname: 'peer',
    sender: { wallClockMs: Date.now(), rtpTimestamp: 1, packets: 1, octets: 160 },
  });
}

describe('when the caller sends its RTCP from a port of its own (a NAT mapping)', () => {
  it('should send its reports there, and not to a stranger who sends reports of another SSRC', async () => {
    const { session, peer } = await harness.start({ rtcpIntervalMs: 60 });
    const callerRtcp = await harness.peer();
    const stranger = await harness.peer();
    await stream(peer, session.localPort, 3, { ssrc: CALLER_SSRC, firstSeq: 10, firstByte: 0 });
    stranger.sendRaw(senderReport(0xbad), session.localPort + 1);
    callerRtcp.sendRaw(senderReport(CALLER_SSRC), session.localPort + 1);
    stranger.sendRaw(senderReport(0xbad), session.localPort + 1);
    await waitFor(() => callerRtcp.received.length >= 2, 2000);
    const report = parseRtcpCompound(callerRtcp.received[0]?.data ?? Buffer.alloc(0));
    expect(report.ok && report.summary.senderSsrc).toBe(session.ssrc);
    expect(stranger.received).toHaveLength(0);
    expect(session.stats().rtcpIn).toBe(3);
  });
});

describe('when the far end’s RTP port is 65535', () => {
  it('should send no report until the far end sends one, keep ticking without errors, then answer its reports', async () => {
    const errors: unknown[] = [];
    const timer = new MonotonicMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, onError: (error) => errors.push(error) });
    const { session } = await harness.start({
      rtcpIntervalMs: 40,
      scheduler,
      timer,
      remote: { address: '127.0.0.1', port: 65535 },
    });
    session.play('item', Buffer.alloc(160 * 25, 0x33));
    await sleep(400);
    expect(errors).toEqual([]);
    expect(session.stats().rtcpOut).toBe(0);
    expect(session.stats().packetsOut).toBeGreaterThan(10);
    // Its reports come from some other port: the session answers there (no RTP latched, any SSRC).
    const farRtcp = await harness.peer();
    farRtcp.sendRaw(senderReport(CALLER_SSRC), session.localPort + 1);
    await waitFor(() => farRtcp.received.length >= 1, 2000);
    expect(errors).toEqual([]);
    expect(parseRtcpCompound(farRtcp.received[0]?.data ?? Buffer.alloc(0))).toMatchObject({
      ok: true,
      summary: { senderSsrc: session.ssrc },
    });
  });
});

describe('when the session reports during a pause in its speech', () => {
  it('should pair the wall clock with the RTP timestamp of that same instant, not of the last packet', async () => {
    // The first report comes 300 to 900 ms after the start; the five frames take 100 ms.
    const { session, peer } = await harness.start({ rtcpIntervalMs: 600 });
    // The far end's reports come from a port of their own: the session's go there.
    const farRtcp = await harness.peer();
    farRtcp.sendRaw(senderReport(CALLER_SSRC), session.localPort + 1);
    session.play('item', Buffer.alloc(160 * 5, 0x33));
    session.endItem('item');
    await waitFor(() => farRtcp.received.length >= 1, 2000);
    const last = peer.received.at(-1);
    const report = farRtcp.received[0];
    expect(peer.received).toHaveLength(5);
    expect(report && last && report.atMs - last.atMs).toBeGreaterThan(150);
    const data = report?.data ?? Buffer.alloc(0);
    // A sender report (PT 200): its RTP timestamp follows the SSRC and the 64-bit NTP time.
    expect(data[1]).toBe(200);
    const reported = data.readUInt32BE(16);
    const expected =
      ((last?.packet?.timestamp ?? 0) +
        Math.round((((report?.atMs ?? 0) - (last?.atMs ?? 0)) * 8000) / 1000)) >>>
      0;
    // Within 50 ms of the media clock (delivery of the two datagrams on loopback varies a little).
    expect(Math.abs((reported - expected) << 0)).toBeLessThan(400);
  });
});

describe('when the far end holds with the RFC 2543 address 0.0.0.0', () => {
  it('should send it neither RTP nor RTCP, keep the audio queued, and send it all once the far end gives an address again', async () => {
    const errors: unknown[] = [];
    const timer = new MonotonicMediaTimer();
    const scheduler = new PlayoutScheduler({ timer, onError: (error) => errors.push(error) });
    const { session, peer } = await harness.start({ rtcpIntervalMs: 40, scheduler, timer });
    session.setRemote({ address: '0.0.0.0', port: peer.port });
    session.play('item', Buffer.alloc(160 * 10, 0x33));
    session.endItem('item');
    await sleep(300);
    expect(session.stats()).toMatchObject({ packetsOut: 0, rtcpOut: 0 });
    session.setRemote({ address: '127.0.0.1', port: peer.port });
    await waitFor(() => peer.packets().length >= 10, 2000);
    expect(peer.packets().map((p) => p.payload[0])).toEqual(Array.from({ length: 10 }, () => 0x33));
    expect(errors).toEqual([]);
  });
});

describe('when a re-INVITE brings a stream with a new SSRC whose sequence numbers start below the old ones', () => {
  it('should give the model every packet of both streams, in order, and count one SSRC change', async () => {
    const { session, peer, events } = await harness.start();
    await stream(peer, session.localPort, 40, { ssrc: 1, firstSeq: 1000, firstByte: 0 });
    session.setRemote({ address: '127.0.0.1', port: peer.port });
    await stream(peer, session.localPort, 30, { ssrc: 2, firstSeq: 960, firstByte: 100 });
    await sleep(200);
    expect(audioEvents(events).map((b) => b[0])).toEqual([
      ...Array.from({ length: 40 }, (_, i) => i),
      ...Array.from({ length: 30 }, (_, i) => 100 + i),
    ]);
    expect(events.filter((e) => e.type === 'ssrc-changed')).toEqual([
      { type: 'ssrc-changed', previousSsrc: 1, ssrc: 2 },
    ]);
    expect(session.stats()).toMatchObject({ ssrcChanges: 1, late: 0, duplicates: 0 });
  });
});

async function publishedProbationDrops(): Promise<number> {
  const data = await registry.getSingleMetric('callgate_rtp_dropped_packets_total')?.get();
  return (data?.values ?? [])
    .filter((v) => v.labels.reason === 'ssrc-probation')
    .reduce((sum, v) => sum + v.value, 0);
}

describe('when a new source is followed after its probation packets were already published as dropped', () => {
  it('should publish each really dropped packet once, not the taken-back ones again', async () => {
    const before = await publishedProbationDrops();
    const { session, peer } = await harness.start();
    const rebound = await harness.peer();
    await stream(peer, session.localPort, 5, { ssrc: CALLER_SSRC, firstSeq: 100, firstByte: 0 });
    // A new SSRC from the caller's address while the caller talks: really dropped.
    await stream(peer, session.localPort, 1, { ssrc: 0xbeef, firstSeq: 7000, firstByte: 0 });
    await sleep(RELATCH_AFTER_SILENCE_MS + 100);
    // The caller comes back from a new port: two packets on probation, published at the next flush...
    await stream(rebound, session.localPort, 2, { ssrc: CALLER_SSRC, firstSeq: 200, firstByte: 0 });
    await sleep(1_200);
    // ...then the third, which gets it followed: the two held packets play and are no longer drops.
    await stream(rebound, session.localPort, 3, { ssrc: CALLER_SSRC, firstSeq: 202, firstByte: 2 });
    await sleep(1_200);
    // Another SSRC from the followed address while it talks: two more real drops.
    await stream(rebound, session.localPort, 2, { ssrc: 0xbeef, firstSeq: 9000, firstByte: 0 });
    await stream(rebound, session.localPort, 1, { ssrc: CALLER_SSRC, firstSeq: 205, firstByte: 5 });
    await session.close();
    expect(session.stats()).toMatchObject({ relatches: 1 });
    expect(session.stats().dropped['ssrc-probation']).toBe(3);
    expect((await publishedProbationDrops()) - before).toBe(3);
  });
});
