/** Trunk security against sipp: digest challenge, good and bad credentials, source allowlist. */
import { afterEach, describe, expect, it } from 'vitest';
import { runSipp } from './sipp-runner.ts';
import { startTestApp, type TestApp } from './sip-test-app.ts';

let app: TestApp | undefined;
afterEach(async () => {
  await app?.stop();
  app = undefined;
});

const digestTenant = {
  id: 'acme',
  numbers: ['100'],
  agent: 'front-desk',
  trunk: {
    digest: { realm: 'callgate.test', username: 'trunk1', passwordEnv: 'TRUNK1_PASSWORD' },
  },
};

describe('when a tenant requires digest authentication', () => {
  it('should challenge with 401 and a nonce, then accept the call with the right password', async () => {
    app = await startTestApp({
      tenants: [digestTenant],
      secrets: { TRUNK1_PASSWORD: 's3cret-pass' },
    });
    const result = await runSipp({
      scenario: 'uac-auth.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
      extraArgs: ['-au', 'trunk1', '-ap', 's3cret-pass'],
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.trace).toMatch(
      /WWW-Authenticate: Digest realm="callgate\.test", nonce="[^"]+", algorithm=MD5, qop="auth"/,
    );
    expect(result.firstLines.filter((line) => line.startsWith('received SIP/2.0'))).toEqual([
      'received SIP/2.0 401 Unauthorized',
      'received SIP/2.0 100 Trying',
      'received SIP/2.0 200 OK',
      'received SIP/2.0 200 OK',
    ]);
    expect(app.calls).toHaveLength(1);
  });

  it('should answer 403 to a wrong password and never reach the application', async () => {
    app = await startTestApp({
      tenants: [digestTenant],
      secrets: { TRUNK1_PASSWORD: 's3cret-pass' },
    });
    const result = await runSipp({
      scenario: 'uac-auth.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
      extraArgs: ['-au', 'trunk1', '-ap', 'wrong-pass'],
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines).toContain('received SIP/2.0 403 Forbidden');
    expect(app.calls).toHaveLength(0);
  });
});

describe('when a source keeps failing digest authentication', () => {
  it('should answer 503 with Retry-After once authFailuresPerMinute is spent, with no new challenge', async () => {
    app = await startTestApp({
      tenants: [digestTenant],
      secrets: { TRUNK1_PASSWORD: 's3cret-pass' },
      sip: { authFailuresPerMinute: 1 },
    });
    const result = await runSipp({
      scenario: 'uac-auth-guess-limited.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
      extraArgs: ['-au', 'trunk1', '-ap', 'wrong-pass'],
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines.filter((line) => /^received SIP\/2\.0 [2-6]/.test(line))).toEqual([
      'received SIP/2.0 401 Unauthorized',
      'received SIP/2.0 403 Forbidden',
      'received SIP/2.0 503 Service Unavailable',
    ]);
    const blocked = /SIP\/2\.0 503 Service Unavailable[\s\S]*?\n\n/.exec(result.trace)?.[0] ?? '';
    expect(blocked).toMatch(/Retry-After: 60/);
    expect(blocked).not.toMatch(/WWW-Authenticate/);
    expect(app.calls).toHaveLength(0);
  });
});

describe('when a tenant only accepts calls from listed sources', () => {
  it('should answer 403 to a source outside the allowlist', async () => {
    app = await startTestApp({
      tenants: [
        {
          id: 'acme',
          numbers: ['100'],
          agent: 'front-desk',
          trunk: { allowFrom: ['192.0.2.0/24'] },
        },
      ],
    });
    const result = await runSipp({
      scenario: 'uac-rejected.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.firstLines).toContain('received SIP/2.0 403 Forbidden');
    expect(app.calls).toHaveLength(0);
  });

  it('should accept a source inside the allowlist', async () => {
    app = await startTestApp({
      tenants: [
        {
          id: 'acme',
          numbers: ['100'],
          agent: 'front-desk',
          trunk: { allowFrom: ['127.0.0.0/8'] },
        },
      ],
    });
    const result = await runSipp({
      scenario: 'uac-caller-bye.xml',
      port: app.udpPort,
      transport: 'udp',
      service: '100',
    });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(app.calls).toHaveLength(1);
  });
});
