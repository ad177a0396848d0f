/**
 * Loading callgate's native RTP module (gateway/media/native/rtp_udp.c, built by
 * `npm run build:native`; the image copies it beside the compiled sources). What it exports is
 * described in the C file's header.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface NativeBinding {
  /**
   * Throws when the epoll set or the loop handle cannot be made (EMFILE, ENOMEM), leaving nothing
   * behind, so it may be called again; and for a `meta` on a resizable or growable buffer.
   */
  start(onBatch: (data: Buffer, count: number) => void, meta: Int32Array): void;
  /** [fd, generation]: the generation tells this socket from later ones on the same descriptor. */
  open(ipv6: boolean, address: string, port: number): [number, number];
  setRemote(fd: number, address: string, port: number): boolean;
  /** Bytes sent, or a negative errno. */
  send(fd: number, data: Buffer, more?: Buffer): number;
  close(fd: number): void;
  readonly META_INTS: number;
  readonly SLOT_BYTES: number;
  readonly BATCH_DATAGRAMS: number;
}

/** Where the module is built, beside this file's folder. */
export const NATIVE_MODULE_PATH = fileURLToPath(
  new URL('./native/build/Release/rtp_udp.node', import.meta.url),
);

/** The first load's outcome: every call's media asks, and the file system is asked once. */
let loaded: NativeBinding | Error | undefined;

/** The module (one per process or worker thread, however many copies of this file load it), or why not. */
export function loadNativeBinding(): NativeBinding | Error {
  loaded ??= load();
  return loaded;
}

function load(): NativeBinding | Error {
  try {
    if (!existsSync(NATIVE_MODULE_PATH))
      throw new Error(`${NATIVE_MODULE_PATH} is not built (npm run build:native)`);
    return createRequire(import.meta.url)(NATIVE_MODULE_PATH) as NativeBinding;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
