/**
 * Certificate renewal on the SIP/TLS listener, with real files, sockets and certificates made by
 * openssl: a rewritten certificate and key are presented to new connections without a restart,
 * connections already open go on, and a pair that does not load keeps the one in use, logged as
 * an error and counted as outcome="failed". Also through the symlink swap a Kubernetes Secret
 * volume makes.
 */
import {
  copyFileSync,
  mkdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sipMetrics } from '../../../gateway/sip/sip-metrics.ts';
import { fingerprint, makeTestPki, type TestPki } from '../../support/tls-certs.ts';
import { OFFER, startTlsDriver, type TlsDriver } from '../../support/tls-driver.ts';
import { TlsSipPeer } from '../../support/tls-sip-peer.ts';

const RELOAD_INTERVAL_MS = 100;

let pki: TestPki;
let ca: string;
let renewed: { cert: string; key: string };
let live: { cert: string; key: string };
let stack: TlsDriver;
const peers: TlsSipPeer[] = [];

beforeAll(async () => {
  pki = makeTestPki();
  ca = readFileSync(pki.caCert, 'utf8');
  renewed = pki.issue('renewed', 'IP:127.0.0.1,DNS:localhost');
  live = { cert: join(pki.dir, 'live.pem'), key: join(pki.dir, 'live.key') };
  install(pki.serverCert, pki.serverKey);
  stack = await startTlsDriver(pki, {
    tls: { certFile: live.cert, keyFile: live.key, reloadIntervalMs: RELOAD_INTERVAL_MS },
  });
});

afterAll(async () => {
  for (const peer of peers) peer.close();
  await stack.stop();
  pki.close();
});

/** Rewrites the files the listener reads, in place, as an operator's renewal would. */
function install(certFile: string, keyFile: string): void {
  writeFileSync(live.cert, readFileSync(certFile));
  writeFileSync(live.key, readFileSync(keyFile));
}

async function reloads(outcome: 'loaded' | 'failed'): Promise<number> {
  const { values } = await sipMetrics.tlsCertificateReloads.get();
  return values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

/** The fingerprint of the certificate a new connection to `port` is shown. */
function presented(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca });
    socket.once('secureConnect', () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

async function openPeer(): Promise<TlsSipPeer> {
  const peer = await TlsSipPeer.open(stack.port, { ca });
  peers.push(peer);
  return peer;
}

const errorLines = (driver: TlsDriver): string[] =>
  driver.logs.filter((line) => /"level":"error"/.test(line));

describe('when the certificate and key files are rewritten', () => {
  it('should show new connections the new certificate, and keep an open connection working', async () => {
    const original = fingerprint(pki.serverCert);
    const existing = await openPeer();
    expect(existing.socket.getPeerCertificate().fingerprint256).toBe(original);
    const loaded = await reloads('loaded');

    install(renewed.cert, renewed.key);
    await vi.waitFor(async () => expect(await reloads('loaded')).toBe(loaded + 1));

    expect(await presented(stack.port)).toBe(fingerprint(renewed.cert));
    expect(stack.driver.tlsCertificateFingerprint()).toBe(fingerprint(renewed.cert));
    expect(stack.logs.some((line) => line.includes(fingerprint(renewed.cert)))).toBe(true);
    // The connection opened before the renewal carries a call as before.
    const callId = `reload-existing-${process.pid}`;
    existing.send(existing.request('INVITE', { callId, body: OFFER }));
    await existing.waitFor(callId, /^SIP\/2\.0 200 /);
    expect(existing.socket.getPeerCertificate().fingerprint256).toBe(original);
  });

  it.each([
    ['a key of another certificate', () => install(pki.serverCert, pki.wrongServerKey)],
    [
      'a certificate file of garbage',
      () => {
        writeFileSync(live.cert, 'not a certificate\n');
        writeFileSync(live.key, readFileSync(pki.serverKey));
      },
    ],
    [
      'a certificate cut off half-way',
      () => {
        const pem = readFileSync(pki.serverCert, 'utf8');
        writeFileSync(live.cert, pem.slice(0, pem.length / 2));
        writeFileSync(live.key, readFileSync(pki.serverKey));
      },
    ],
    ['an empty key file', () => install(pki.serverCert, '/dev/null')],
  ])(
    'should keep the pair in use on %s, log an error and count it failed',
    async (_what, write) => {
      const failed = await reloads('failed');
      const loaded = await reloads('loaded');
      const errors = errorLines(stack).length;

      write();
      await vi.waitFor(async () => expect(await reloads('failed')).toBe(failed + 1));

      expect(await reloads('loaded')).toBe(loaded);
      expect(await presented(stack.port)).toBe(fingerprint(renewed.cert));
      const logged = errorLines(stack).slice(errors);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain('tls certificate not reloaded: the pair in use stays');
      expect(logged[0]).toContain(fingerprint(renewed.cert));
    },
  );

  it('should load a good pair written after a broken one', async () => {
    const loaded = await reloads('loaded');
    install(pki.serverCert, pki.serverKey);
    await vi.waitFor(async () => expect(await reloads('loaded')).toBe(loaded + 1));
    expect(await presented(stack.port)).toBe(fingerprint(pki.serverCert));
    const callId = `reload-after-${process.pid}`;
    const peer = await openPeer();
    peer.send(peer.request('INVITE', { callId, body: OFFER }));
    await peer.waitFor(callId, /^SIP\/2\.0 200 /);
  });
});

describe('when a Kubernetes Secret volume swaps its ..data symlink', () => {
  /** The layout kubelet writes: tls.crt -> ..data/tls.crt, ..data -> a timestamped folder. */
  function secretVolume(root: string, version: string, certFile: string, keyFile: string): void {
    const folder = join(root, `..${version}`);
    mkdirSync(folder);
    copyFileSync(certFile, join(folder, 'tls.crt'));
    copyFileSync(keyFile, join(folder, 'tls.key'));
    symlinkSync(`..${version}`, join(root, '..data_tmp'));
    renameSync(join(root, '..data_tmp'), join(root, '..data'));
  }

  it('should present the certificate the new folder holds', async () => {
    const root = join(pki.dir, 'secret');
    mkdirSync(root);
    secretVolume(root, 'v1', pki.serverCert, pki.serverKey);
    symlinkSync('..data/tls.crt', join(root, 'tls.crt'));
    symlinkSync('..data/tls.key', join(root, 'tls.key'));
    const mounted = await startTlsDriver(pki, {
      tls: {
        certFile: join(root, 'tls.crt'),
        keyFile: join(root, 'tls.key'),
        reloadIntervalMs: RELOAD_INTERVAL_MS,
      },
    });
    try {
      expect(await presented(mounted.port)).toBe(fingerprint(pki.serverCert));
      const loaded = await reloads('loaded');
      secretVolume(root, 'v2', renewed.cert, renewed.key);
      await vi.waitFor(async () => expect(await reloads('loaded')).toBe(loaded + 1));
      expect(await presented(mounted.port)).toBe(fingerprint(renewed.cert));
    } finally {
      await mounted.stop();
    }
  });
});
