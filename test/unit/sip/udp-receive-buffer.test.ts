/**
 * The UDP receive buffer: callgate asks for sip.udpReceiveBufferBytes, the kernel grants at most
 * net.core.rmem_max, and a cap is logged with the sysctl that lifts it.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { grantedReceiveBuffer, UdpTransport } from '../../../gateway/sip/udp-transport.ts';

const linux = process.platform === 'linux';
const rmemMax = linux ? Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8').trim()) : 0;

let transport: UdpTransport | undefined;
afterEach(async () => {
  await transport?.stop();
  transport = undefined;
});

async function open(
  bytes: number,
): Promise<{ granted: number | undefined; lines: Array<Record<string, unknown>> }> {
  const lines: Array<Record<string, unknown>> = [];
  const logger = new Logger({
    level: 'info',
    sink: { write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  transport = new UdpTransport({
    address: '127.0.0.1',
    port: 0,
    receiveBufferBytes: bytes,
    onMessage: () => undefined,
    logger,
  });
  await transport.start();
  return { granted: transport.receiveBufferSize(), lines };
}

describe.runIf(linux)('when the UDP receive buffer is sized', () => {
  it('should get what it asks for below net.core.rmem_max, and say so', async () => {
    const bytes = Math.min(262_144, rmemMax);
    const { granted, lines } = await open(bytes);
    expect(granted).toBe(bytes);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 'info', msg: 'UDP receive buffer', grantedBytes: bytes }),
    );
  });

  it('should be capped at net.core.rmem_max above it, with a warning naming the sysctl', async () => {
    const bytes = rmemMax * 2;
    const { granted, lines } = await open(bytes);
    expect(granted).toBe(rmemMax);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        requestedBytes: bytes,
        grantedBytes: rmemMax,
        rmemMax,
        fix: `sysctl -w net.core.rmem_max=${bytes}`,
      }),
    );
  });
});

describe('when the kernel reports SO_RCVBUF', () => {
  it('should halve the doubled Linux figure and keep the others as they are', () => {
    expect(grantedReceiveBuffer(8_388_608, 'linux')).toBe(4_194_304);
    expect(grantedReceiveBuffer(4_194_304, 'darwin')).toBe(4_194_304);
  });
});
