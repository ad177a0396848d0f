/**
 * rtp.sockets: which RTP sockets a session gets, and what happens when the native module is not
 * there (not built, or built for another platform).
 */
import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { parseConfig } from '../../../config/load.ts';
import { chooseRtpSockets, nativeRtpSockets, rtpSocketsEngine } from '../../../gateway/media/native-rtp-sockets.ts';

const notBuilt = () => new Error('rtp_udp.node is not built (npm run build:native)');

describe('when the native module cannot be loaded', () => {
  it('should fall back to dgram for auto and say why', () => {
    expect(rtpSocketsEngine('auto', notBuilt)).toBeUndefined();
    expect(chooseRtpSockets('auto', notBuilt)).toEqual({ engine: 'node', fallbackReason: 'rtp_udp.node is not built (npm run build:native)' });
  });

  it('should not start anything when the binding does not load', () => {
    const reason = new Error('wrong ELF class');
    expect(nativeRtpSockets(() => reason)).toBe(reason);
  });

  it('should refuse native with an error that names the setting and the reason', () => {
    let thrown: unknown;
    try {
      rtpSocketsEngine('native', notBuilt);
    } catch (error) {
      thrown = error;
    }
    expect(isCallgateError(thrown)).toBe(true);
    expect(thrown).toMatchObject({ code: 'CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE' });
    expect((thrown as Error).message).toContain('rtp.sockets is native');
    expect((thrown as Error).message).toContain('npm run build:native');
  });

  it('should never load it for node', () => {
    let loads = 0;
    expect(
      chooseRtpSockets('node', () => {
        loads++;
        return notBuilt();
      }),
    ).toEqual({ engine: 'node' });
    expect(loads).toBe(0);
  });
});

describe('when rtp.sockets is configured', () => {
  it('should default to auto and reject other values', () => {
    expect(parseConfig({}).rtp.sockets).toBe('auto');
    expect(() => parseConfig({ rtp: { sockets: 'uring' } })).toThrow(/rtp\.sockets/);
  });
});
