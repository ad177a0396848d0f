/**
 * rtp.sockets: which RTP sockets a session gets, and what happens when the native module is not
 * there (not built, or built for another platform).
 */
import { describe, expect, it } from 'vitest';
import { isCallgateError } from '../../../config/errors.ts';
import { parseConfig } from '../../../config/load.ts';
import type { NativeBinding } from '../../../gateway/media/native-rtp-binding.ts';
import {
  NativeRtpSockets,
  chooseRtpSockets,
  nativeRtpSockets,
  rtpSocketsEngine,
} from '../../../gateway/media/native-rtp-sockets.ts';

const notBuilt = () => new Error('rtp_udp.node is not built (npm run build:native)');

/** A binding that loads, whose start() throws as the module's does when the process is out of descriptors, `failures` times. */
function bindingFailingToStart(failures = Infinity): NativeBinding & { starts: number } {
  return {
    starts: 0,
    start() {
      this.starts++;
      if (this.starts <= failures)
        throw Object.assign(new Error('epoll_create1: Too many open files'), { code: 'EMFILE' });
    },
    open: () => [0, 0],
    setRemote: () => false,
    send: () => 0,
    close: () => {},
    META_INTS: 10,
    SLOT_BYTES: 2048,
    BATCH_DATAGRAMS: 512,
  };
}

describe('when the native module cannot be loaded', () => {
  it('should fall back to dgram for auto and say why', () => {
    expect(rtpSocketsEngine('auto', notBuilt)).toBeUndefined();
    expect(chooseRtpSockets('auto', notBuilt)).toEqual({
      engine: 'node',
      fallbackReason: 'rtp_udp.node is not built (npm run build:native)',
    });
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

describe('when the native module loads but its start() throws', () => {
  it('should fall back to dgram for auto and give the start error as the reason', () => {
    const binding = bindingFailingToStart();
    expect(chooseRtpSockets('auto', () => nativeRtpSockets(() => binding))).toEqual({
      engine: 'node',
      fallbackReason: 'start() failed (EMFILE): epoll_create1: Too many open files',
    });
  });

  it('should refuse native with CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE carrying the start error, not the raw EMFILE', () => {
    const binding = bindingFailingToStart();
    let thrown: unknown;
    try {
      chooseRtpSockets('native', () => nativeRtpSockets(() => binding));
    } catch (error) {
      thrown = error;
    }
    expect(isCallgateError(thrown)).toBe(true);
    expect(thrown).toMatchObject({ code: 'CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE' });
    expect((thrown as Error).message).toContain(
      'start() failed (EMFILE): epoll_create1: Too many open files',
    );
  });

  it('should try to start again on the next call, and keep the module once it has started', () => {
    const binding = bindingFailingToStart(1);
    expect(nativeRtpSockets(() => binding)).toBeInstanceOf(Error);
    const started = nativeRtpSockets(() => binding);
    expect(started).toBeInstanceOf(NativeRtpSockets);
    expect(chooseRtpSockets('auto', () => nativeRtpSockets(() => binding))).toEqual({
      engine: 'native',
      native: started,
    });
    expect(binding.starts).toBe(2);
  });
});

describe('when rtp.sockets is configured', () => {
  it('should default to auto and reject other values', () => {
    expect(parseConfig({}).rtp.sockets).toBe('auto');
    expect(() => parseConfig({ rtp: { sockets: 'uring' } })).toThrow(/rtp\.sockets/);
  });
});
