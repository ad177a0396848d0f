import { describe, expect, it } from 'vitest';
import { DtmfReceiver } from '../../../gateway/media/dtmf-receiver.ts';
import { DtmfSender } from '../../../gateway/media/dtmf-sender.ts';
import {
  parseTelephoneEvent,
  serializeTelephoneEvent,
  type DtmfDigit,
} from '../../../gateway/media/telephone-event.ts';

/** The packets of one key press as a typical gateway (and sipp's dtmf_2833 pcaps) sends them. */
function press(
  digit: DtmfDigit,
  timestamp: number,
  updates = 5,
): Array<{ timestamp: number; payload: Buffer }> {
  const packets = [];
  for (let i = 1; i <= updates; i++)
    packets.push({
      timestamp,
      payload: serializeTelephoneEvent({ digit, end: false, volume: 10, duration: i * 160 }),
    });
  for (let i = 0; i < 3; i++)
    packets.push({
      timestamp,
      payload: serializeTelephoneEvent({
        digit,
        end: true,
        volume: 10,
        duration: (updates + 1) * 160,
      }),
    });
  return packets;
}

function digitsOf(
  receiver: DtmfReceiver,
  packets: ReadonlyArray<{ timestamp: number; payload: Buffer }>,
): string {
  return packets
    .map((p) => receiver.receive(p))
    .map((r) => (r.kind === 'digit' ? r.digit : ''))
    .join('');
}

describe('when receiving RFC 4733 telephone-events', () => {
  it('should parse the wire format of an end packet', () => {
    expect(parseTelephoneEvent(Buffer.from('0b8a0320', 'hex'))).toEqual({
      event: 11,
      digit: '#',
      end: true,
      volume: 10,
      duration: 800,
    });
  });

  it('should report one digit per press despite updates and three end packets', () => {
    const receiver = new DtmfReceiver();
    expect(
      digitsOf(receiver, [...press('1', 1000), ...press('2', 3000), ...press('#', 5000)]),
    ).toBe('12#');
  });

  it('should report two presses of the same key as two digits', () => {
    expect(digitsOf(new DtmfReceiver(), [...press('5', 1000), ...press('5', 2600)])).toBe('55');
  });

  it('should ignore an old event retransmitted after a newer one', () => {
    const first = press('7', 1000);
    expect(digitsOf(new DtmfReceiver(), [...first, ...press('8', 3000), ...first.slice(-2)])).toBe(
      '78',
    );
  });

  it('should still report a press whose first packets were lost', () => {
    expect(digitsOf(new DtmfReceiver(), press('9', 1000).slice(4))).toBe('9');
  });

  it('should report each release once, on the first end packet, with the duration the sender measured', () => {
    const receiver = new DtmfReceiver();
    const results = [...press('1', 1000), ...press('2', 3000, 13)].map((p) => receiver.receive(p));
    expect(results.filter((r) => r.kind === 'end')).toEqual([
      { kind: 'end', digit: '1', duration: 960 },
      { kind: 'end', digit: '2', duration: 2240 },
    ]);
    // Updates and the two repeated end packets of each press are repeats.
    expect(results.filter((r) => r.kind === 'repeat')).toHaveLength(4 + 2 + 12 + 2);
  });

  it('should report the press and its release together when only end packets arrive', () => {
    const receiver = new DtmfReceiver();
    const results = press('9', 1000)
      .slice(5)
      .map((p) => receiver.receive(p));
    expect(results).toEqual([
      { kind: 'digit', digit: '9', endedDuration: 960 },
      { kind: 'repeat' },
      { kind: 'repeat' },
    ]);
  });

  it('should ignore malformed payloads and non-digit events', () => {
    const receiver = new DtmfReceiver();
    expect(receiver.receive({ timestamp: 1, payload: Buffer.from('0b80', 'hex') })).toEqual({
      kind: 'ignored',
      reason: 'malformed',
    });
    expect(receiver.receive({ timestamp: 2, payload: Buffer.from('108a0320', 'hex') })).toEqual({
      kind: 'ignored',
      reason: 'not-a-digit',
    });
  });
});

describe('when sending digits', () => {
  it('should send marker, growing durations and three end packets on one timestamp', () => {
    const sender = new DtmfSender({ clockRate: 8000 });
    sender.enqueue('4', 60);
    const packets = [];
    for (let frame = 0; frame < 8; frame++) packets.push(sender.next(frame * 160));
    const wire = packets.map((p) =>
      p ? `${p.marker ? 'M' : ''}${p.payload.toString('hex')}@${p.timestamp}` : '-',
    );
    expect(wire).toEqual([
      'M040a00a0@0',
      '040a0140@0',
      '048a01e0@0',
      '048a01e0@0',
      '048a01e0@0',
      '-',
      '-',
      '-',
    ]);
  });

  it('should be heard as the same digits by a receiver', () => {
    const sender = new DtmfSender({ clockRate: 8000 });
    for (const digit of ['1', '2', '2', '#'] as const) sender.enqueue(digit);
    const receiver = new DtmfReceiver();
    let heard = '';
    for (let frame = 0; frame < 100; frame++) {
      const packet = sender.next(frame * 160);
      if (!packet) continue;
      const result = receiver.receive(packet);
      if (result.kind === 'digit') heard += result.digit;
    }
    expect(heard).toBe('122#');
    expect(sender.pending).toBe(0);
  });
});
