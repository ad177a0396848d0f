/**
 * formatIpv6 writes the RemoteInfo address of an IPv6 datagram received by the native RTP
 * sockets, and the RTP session compares it with what dgram gave and with SDP addresses, so it
 * must print exactly what Node prints. Node formats addresses with libuv's inet_ntop, which
 * `net.SocketAddress` exposes without a socket; a real udp6 socket ties that oracle to rinfo.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { SocketAddress } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { formatIpv6 } from '../../../gateway/media/ipv6-text.ts';
import { randomInt, seededRandom } from './seeded-random.ts';

function bytesOf(groups: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

/** What Node (libuv's inet_ntop) prints for the address: parsed from the full eight-group form, printed back. */
function nodeFormat(groups: readonly number[]): string {
  return new SocketAddress({ address: groups.map((g) => g.toString(16)).join(':'), family: 'ipv6' })
    .address;
}

/** Eight 16-bit groups from text Node parses (inet_pton), to write the table as people write addresses. */
function groupsOf(text: string): number[] {
  const url = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const [head = '', tail] = url.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros =
    tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16));
}

describe('when formatting an IPv6 address as inet_ntop does', () => {
  // RFC 5952 section 4 and 5, and the IPv4 forms inet_ntop keeps.
  const table: Array<[string, string, string]> = [
    ['all zeros', '0:0:0:0:0:0:0:0', '::'],
    ['loopback', '0:0:0:0:0:0:0:1', '::1'],
    ['a run at the end', '1:0:0:0:0:0:0:0', '1::'],
    [
      'leading zeros dropped, longest run compressed (4.1, 4.2.1)',
      '2001:0db8:0000:0000:0000:0000:0000:0001',
      '2001:db8::1',
    ],
    ['leading zeros of a group dropped (4.1)', '2001:db8:0:0:0:0:0:0aaa', '2001:db8::aaa'],
    ['a single zero group not compressed (4.2.2)', '2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['the longer of two runs compressed (4.2.3)', '2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['the first of two equal runs compressed (4.2.3)', '2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['lowercase hex (4.3)', '2001:DB8:0:0:0:0:0:ABCD', '2001:db8::abcd'],
    [
      'no zero group',
      'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    ],
    ['a zero run in the middle', 'fe80:0:0:0:1:2:3:4', 'fe80::1:2:3:4'],
    ['IPv4-mapped (5)', '0:0:0:0:0:ffff:c000:0201', '::ffff:192.0.2.1'],
    ['IPv4-mapped loopback', '0:0:0:0:0:ffff:7f00:1', '::ffff:127.0.0.1'],
    ['IPv4-mapped zero address', '0:0:0:0:0:ffff:0:0', '::ffff:0.0.0.0'],
    ['IPv4-compatible', '0:0:0:0:0:0:c000:0201', '::192.0.2.1'],
    ['IPv4-compatible with a zero last group', '0:0:0:0:0:0:1:0', '::0.1.0.0'],
    ['::2 is not written as IPv4-compatible', '0:0:0:0:0:0:0:2', '::2'],
    ['ffff in the fifth group is not IPv4-mapped', '0:0:0:0:ffff:0:0:1', '::ffff:0:0:1'],
    [
      'ffff in the sixth group after a non-zero group is not IPv4-mapped',
      '0:0:0:1:0:ffff:7f00:1',
      '::1:0:ffff:7f00:1',
    ],
  ];

  it.each(table)('should write %s as Node does', (_name, text, expected) => {
    const groups = groupsOf(text);
    expect(groups).toHaveLength(8);
    expect(nodeFormat(groups)).toBe(expected);
    expect(formatIpv6(bytesOf(groups))).toBe(expected);
  });

  it('should agree with Node for every pattern of zero and non-zero groups', () => {
    // 256 patterns cover every position and length of zero runs; the non-zero values vary the
    // hex width, and a sixth group of ffff covers the IPv4-mapped test.
    const values = [1, 0xabc, 0xffff];
    const mismatches: string[] = [];
    for (let pattern = 0; pattern < 256; pattern++) {
      for (const value of values) {
        const groups = Array.from(
          { length: 8 },
          (_, i) => ((pattern >> i) & 1 ? value + i : 0) & 0xffff,
        );
        const expected = nodeFormat(groups);
        const actual = formatIpv6(bytesOf(groups));
        if (actual !== expected) mismatches.push(`${groups.join(',')}: ${actual} != ${expected}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('should agree with Node for generated addresses', () => {
    const random = seededRandom(5952);
    const mismatches: string[] = [];
    for (let n = 0; n < 5000; n++) {
      const groups = Array.from({ length: 8 }, () => {
        const pick = randomInt(random, 4);
        return pick === 0 || pick === 1 ? 0 : pick === 2 ? 0xffff : randomInt(random, 0x10000);
      });
      const expected = nodeFormat(groups);
      const actual = formatIpv6(bytesOf(groups));
      if (actual !== expected) mismatches.push(`${groups.join(',')}: ${actual} != ${expected}`);
    }
    expect(mismatches).toEqual([]);
  });

  it('should read only the sixteen address bytes of a longer view', () => {
    // The native module hands the address as a view into a shared Int32Array.
    const backing = new Uint8Array(24).fill(0xee);
    backing.set(bytesOf([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]), 4);
    expect(formatIpv6(backing.subarray(4, 20))).toBe('2001:db8::1');
  });
});

describe('when a real udp6 socket receives a datagram', () => {
  const sockets: Socket[] = [];

  afterEach(async () => {
    await Promise.all(
      sockets
        .splice(0)
        .map((socket) => new Promise<void>((resolve) => socket.close(() => resolve()))),
    );
  });

  async function bound(type: 'udp4' | 'udp6', address: string): Promise<Socket> {
    const socket = createSocket(type);
    sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, address, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    return socket;
  }

  /** The rinfo of one datagram from `sender` to `receiver` (reached at `to`), failing after a second. */
  async function sourceSeenBy(receiver: Socket, sender: Socket, to: string): Promise<RemoteInfo> {
    return new Promise<RemoteInfo>((resolve, reject) => {
      const timeout = setTimeout(
        () => reject(new Error(`no datagram from ${to} within 1 s`)),
        1000,
      );
      receiver.once('message', (_data, from) => {
        clearTimeout(timeout);
        resolve(from);
      });
      sender.send(Buffer.from('probe'), receiver.address().port, to, (error) => {
        if (error === null) return;
        clearTimeout(timeout);
        reject(error);
      });
    });
  }

  it('should print ::1 as Node does in rinfo', async () => {
    const receiver = await bound('udp6', '::1');
    const sender = await bound('udp6', '::1');
    const from = await sourceSeenBy(receiver, sender, '::1');
    const loopback = bytesOf([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(from.family).toBe('IPv6');
    expect(formatIpv6(loopback)).toBe(from.address);
    expect(nodeFormat([0, 0, 0, 0, 0, 0, 0, 1])).toBe(from.address);
  });

  it('should print an IPv4 sender seen by a dual-stack socket as Node does in rinfo', async (context) => {
    let receiver: Socket;
    try {
      receiver = await bound('udp6', '::ffff:127.0.0.1');
    } catch {
      // IPV6_V6ONLY by default (net.ipv6.bindv6only=1): there is no such sender to compare with.
      context.skip();
      return;
    }
    const sender = await bound('udp4', '127.0.0.1');
    const from = await sourceSeenBy(receiver, sender, '127.0.0.1');
    const mapped = [0, 0, 0, 0, 0, 0xffff, 0x7f00, 1];
    expect(from.address).toBe('::ffff:127.0.0.1');
    expect(formatIpv6(bytesOf(mapped))).toBe(from.address);
    expect(nodeFormat(mapped)).toBe(from.address);
  });
});
