import { describe, expect, it } from 'vitest';
import {
  DtmfReceiver,
  type DtmfPacket,
  type DtmfReceiveResult,
} from '../../../gateway/media/dtmf-receiver.ts';
import { DtmfSender, type DtmfOutPacket } from '../../../gateway/media/dtmf-sender.ts';
import {
  parseTelephoneEvent,
  serializeTelephoneEvent,
  type DtmfDigit,
} from '../../../gateway/media/telephone-event.ts';

/** telephone-event at 48 kHz (Opus calls): 960 units per 20 ms, 0xFFFF units last 1.365 s. */
const UNITS_PER_FRAME_48K = 960;
/** Close to the 32-bit wrap, so the third segment's timestamp wraps past zero. */
const WRAPPING_START = 2 ** 32 - 100_000;

/**
 * One press as RFC 4733 §2.5.1.3 sends it when it outlasts the duration field: each segment
 * counts up in 20 ms steps, a segment that passes 0xFFFF reports 0xFFFF without the E bit, the
 * next starts 0xFFFF units later, and only the last segment ends (three end packets).
 */
function longPress(
  digit: DtmfDigit,
  start: number,
  totalUnits: number,
  unitsPerFrame: number,
): DtmfPacket[] {
  const packets: DtmfPacket[] = [];
  let segmentStart = 0;
  for (let elapsed = unitsPerFrame; elapsed < totalUnits; elapsed += unitsPerFrame) {
    if (elapsed - segmentStart > 0xffff) {
      packets.push({
        timestamp: (start + segmentStart) >>> 0,
        payload: serializeTelephoneEvent({ digit, end: false, volume: 10, duration: 0xffff }),
      });
      segmentStart += 0xffff;
    }
    packets.push({
      timestamp: (start + segmentStart) >>> 0,
      payload: serializeTelephoneEvent({
        digit,
        end: false,
        volume: 10,
        duration: elapsed - segmentStart,
      }),
    });
  }
  for (let i = 0; i < 3; i++) {
    packets.push({
      timestamp: (start + segmentStart) >>> 0,
      payload: serializeTelephoneEvent({
        digit,
        end: true,
        volume: 10,
        duration: totalUnits - segmentStart,
      }),
    });
  }
  return packets;
}

function receiveAll(receiver: DtmfReceiver, packets: readonly DtmfPacket[]): DtmfReceiveResult[] {
  return packets.map((packet) => receiver.receive(packet));
}

function sendAll(sender: DtmfSender, start: number, unitsPerFrame: number): DtmfOutPacket[] {
  const packets: DtmfOutPacket[] = [];
  for (let frame = 0; sender.pending > 0; frame++) {
    const packet = sender.next((start + frame * unitsPerFrame) >>> 0);
    if (packet) packets.push(packet);
  }
  return packets;
}

describe('when a key is held longer than the duration field holds', () => {
  it('should report one digit and one release with the whole duration for a 3 s press at 48 kHz in three segments', () => {
    const packets = longPress('5', WRAPPING_START, 144_000, UNITS_PER_FRAME_48K);
    expect([...new Set(packets.map((p) => p.timestamp))]).toEqual([
      WRAPPING_START,
      WRAPPING_START + 0xffff,
      31_070,
    ]);

    const results = receiveAll(new DtmfReceiver(), packets);

    expect(results.filter((r) => r.kind === 'digit')).toEqual([{ kind: 'digit', digit: '5' }]);
    expect(results.filter((r) => r.kind === 'end')).toEqual([
      { kind: 'end', digit: '5', duration: 144_000 },
    ]);
    expect(results.filter((r) => r.kind === 'repeat')).toHaveLength(packets.length - 2);
  });

  it('should still hear one press when updates of an earlier segment arrive late', () => {
    const packets = longPress('5', 1_000_000, 144_000, UNITS_PER_FRAME_48K);
    const firstSegment = packets.filter((p) => p.timestamp === 1_000_000);
    const results = receiveAll(new DtmfReceiver(), [
      ...packets.slice(0, 80),
      ...firstSegment.slice(-2),
      ...packets.slice(80),
    ]);
    expect(results.filter((r) => r.kind === 'digit')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'end')).toEqual([
      { kind: 'end', digit: '5', duration: 144_000 },
    ]);
  });

  it('should report the whole duration when only the end packets of the last segment follow the first', () => {
    const packets = longPress('9', 1_000_000, 144_000, UNITS_PER_FRAME_48K);
    const lastSegment = packets.filter((p) => p.timestamp === 1_000_000 + 2 * 0xffff);
    const middle = packets.filter((p) => p.timestamp === 1_000_000 + 0xffff);
    const results = receiveAll(new DtmfReceiver(), [
      packets[0] as DtmfPacket,
      middle[0] as DtmfPacket,
      ...lastSegment.slice(-3),
    ]);
    expect(results).toEqual([
      { kind: 'digit', digit: '9' },
      { kind: 'repeat' },
      { kind: 'end', digit: '9', duration: 144_000 },
      { kind: 'repeat' },
      { kind: 'repeat' },
    ]);
  });

  it('should report a new digit at the continuation timestamp when the key differs or the press had ended', () => {
    const shortPress = (digit: DtmfDigit, timestamp: number, end: boolean): DtmfPacket => ({
      timestamp,
      payload: serializeTelephoneEvent({ digit, end, volume: 10, duration: 960 }),
    });
    const otherKey = receiveAll(new DtmfReceiver(), [
      shortPress('1', 5_000, false),
      shortPress('2', 5_000 + 0xffff, false),
    ]);
    expect(otherKey.map((r) => (r.kind === 'digit' ? r.digit : r.kind))).toEqual(['1', '2']);
    const released = receiveAll(new DtmfReceiver(), [
      shortPress('1', 5_000, true),
      shortPress('1', 5_000 + 0xffff, false),
    ]);
    expect(released.map((r) => (r.kind === 'digit' ? r.digit : r.kind))).toEqual(['1', '1']);
  });

  it('should send a 3 s digit at 48 kHz as three segments 0xFFFF units apart, ending only the last', () => {
    const sender = new DtmfSender({ clockRate: 48_000 });
    sender.enqueue('5', 3000);
    const packets = sendAll(sender, WRAPPING_START, UNITS_PER_FRAME_48K);
    const wire = packets.map((p) => ({ ...p, event: parseTelephoneEvent(p.payload) }));

    const segments = [WRAPPING_START, WRAPPING_START + 0xffff, 31_070].map((timestamp) =>
      wire.filter((p) => p.timestamp === timestamp),
    );
    expect(segments.map((s) => s.length)).toEqual([69, 68, 15]);
    expect(segments.reduce((sum, s) => sum + s.length, 0)).toBe(packets.length);
    // 150 frames of 960 units: the first segment is full in frame 69, the second in frame 137.
    expect(segments.map((s) => s.map((p) => p.event?.duration))).toEqual([
      [...Array.from({ length: 68 }, (_, i) => (i + 1) * 960), 0xffff],
      [...Array.from({ length: 67 }, (_, i) => (i + 70) * 960 - 0xffff), 0xffff],
      [...Array.from({ length: 13 }, (_, i) => (i + 138) * 960 - 2 * 0xffff), 12_930, 12_930],
    ]);
    expect(wire.map((p) => p.event?.end)).toEqual([
      ...Array<boolean>(149).fill(false),
      true,
      true,
      true,
    ]);
    expect(wire.map((p) => p.marker)).toEqual([true, ...Array<boolean>(151).fill(false)]);

    const results = receiveAll(new DtmfReceiver(), packets);
    expect(results.filter((r) => r.kind === 'digit')).toEqual([{ kind: 'digit', digit: '5' }]);
    expect(results.filter((r) => r.kind === 'end')).toEqual([
      { kind: 'end', digit: '5', duration: 144_000 },
    ]);
  });

  it.each([
    { clockRate: 8000, durationMs: 100 },
    { clockRate: 8000, durationMs: 20_000 },
    { clockRate: 16_000, durationMs: 8_200 },
    { clockRate: 48_000, durationMs: 1_360 },
    { clockRate: 48_000, durationMs: 1_380 },
    { clockRate: 48_000, durationMs: 10_000 },
  ])(
    'should be heard as one press of the sent length at $clockRate Hz for $durationMs ms',
    ({ clockRate, durationMs }) => {
      const unitsPerFrame = clockRate / 50;
      const sender = new DtmfSender({ clockRate });
      sender.enqueue('#', durationMs);
      sender.enqueue('1');
      const packets = sendAll(sender, 7_000, unitsPerFrame);

      const timestamps = [...new Set(packets.map((p) => p.timestamp))];
      const segments = Math.ceil(((durationMs / 20) * unitsPerFrame) / 0xffff);
      expect(timestamps).toHaveLength(segments + 1);
      expect(timestamps.slice(1, segments).map((t, i) => t - (timestamps[i] as number))).toEqual(
        Array<number>(segments - 1).fill(0xffff),
      );
      expect(packets.filter((p) => p.marker)).toHaveLength(2);
      const results = receiveAll(new DtmfReceiver(), packets);
      expect(
        results.filter((r) => r.kind === 'digit').map((r) => r.kind === 'digit' && r.digit),
      ).toEqual(['#', '1']);
      expect(
        results.filter((r) => r.kind === 'end').map((r) => r.kind === 'end' && r.duration),
      ).toEqual([(durationMs / 20) * unitsPerFrame, 5 * unitsPerFrame]);
    },
  );

  it('should refuse to encode a duration the 16-bit field cannot hold instead of clamping it', () => {
    expect(
      serializeTelephoneEvent({ digit: '1', end: false, volume: 10, duration: 0xffff }).toString(
        'hex',
      ),
    ).toBe('010affff');
    expect(() =>
      serializeTelephoneEvent({ digit: '1', end: false, volume: 10, duration: 0x10000 }),
    ).toThrow(RangeError);
    expect(() =>
      serializeTelephoneEvent({ digit: '1', end: false, volume: 10, duration: -1 }),
    ).toThrow(RangeError);
  });
});
