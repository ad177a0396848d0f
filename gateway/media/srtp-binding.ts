/**
 * Loading callgate's SRTP module (gateway/media/native/srtp_binding.c over libsrtp2, built with
 * the RTP sockets by `npm run build:native`). A module built without libsrtp2, or none at all,
 * leaves SRTP unavailable: plain RTP calls go on, SRTP ones are refused at call setup.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** An opaque libsrtp context: one direction of one call. */
export type SrtpHandle = { readonly __srtpContext: unique symbol };

export interface SrtpBinding {
  readonly available: true;
  readonly version: string;
  /**
   * What runs the AES_CM suites' primitives: `openssl` (native/srtp_openssl_crypto.c, whose cost
   * does not grow with the number of calls as Debian's libsrtp2 NSS build does), `libsrtp` (its
   * own build's) or `mixed`, when only one of the two passed its known-answer test.
   */
  readonly crypto: 'openssl' | 'libsrtp' | 'mixed';
  /** Room protect() needs after the RTP packet in its buffer. */
  readonly TRAILER_BYTES: number;
  /** Room protectRtcp() needs after the RTCP packet in its buffer. */
  readonly RTCP_TRAILER_BYTES: number;
  /** Throws on a bad suite or key length (the caller checks both first) or a libsrtp failure. */
  create(suite: number, keySalt: Buffer, outbound: boolean): SrtpHandle;
  /** The protected length, or a negative libsrtp status. */
  protect(context: SrtpHandle, packet: Buffer, length: number): number;
  /** The plain length (decrypted in place), or a negative libsrtp status. */
  unprotect(context: SrtpHandle, packet: Buffer): number;
  protectRtcp(context: SrtpHandle, packet: Buffer, length: number): number;
  unprotectRtcp(context: SrtpHandle, packet: Buffer): number;
  dispose(context: SrtpHandle): void;
}

/** libsrtp statuses (srtp_err_status_t) the media layer tells apart. */
export const SRTP_STATUS = { authFail: 7, replayFail: 9, replayOld: 10 } as const;

const SRTP_MODULE_PATH = fileURLToPath(
  new URL('./native/build/Release/srtp_binding.node', import.meta.url),
);

let loaded: SrtpBinding | Error | undefined;

/** The module, loaded once per process, or why SRTP is unavailable. */
export function loadSrtpBinding(): SrtpBinding | Error {
  loaded ??= load();
  return loaded;
}

function load(): SrtpBinding | Error {
  try {
    if (!existsSync(SRTP_MODULE_PATH))
      throw new Error(`${SRTP_MODULE_PATH} is not built (npm run build:native)`);
    const binding = createRequire(import.meta.url)(SRTP_MODULE_PATH) as
      SrtpBinding | { readonly available: false };
    if (!binding.available)
      throw new Error('the SRTP module was built without libsrtp2 (install libsrtp2-dev, rebuild)');
    return binding;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
