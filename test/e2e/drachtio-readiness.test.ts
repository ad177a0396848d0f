/**
 * callgate (gateway/main.ts) with `sip.driver: drachtio`: /readyz fails check `sip` while
 * drachtio-server is down or refuses the secret, and "callgate ready" is logged only once the
 * driver is connected (test/support/drachtio-server.ts plays drachtio-server).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from '../../jobs/redis/local-redis.ts';
import { DrachtioWireServer } from '../support/drachtio-server.ts';
import { startTs, waitFor, type StartedProcess } from '../support/processes.ts';
import { deletePrefix, testRedis, testRedisUrl } from '../support/redis.ts';
import { freeSipPort } from '../support/ports.ts';
import { writeCallgateConfig } from './callgate-process.ts';
import { TEST_OPERATOR_TOKEN, TEST_OPERATOR_TOKEN_ENV } from '../support/operator-api.ts';

const SECRET = 'cymru';
let proc: StartedProcess | undefined;
let server: DrachtioWireServer | undefined;
let prefix: string | undefined;

afterAll(async () => {
  proc?.kill();
  await server?.close();
  if (prefix === undefined) return;
  const redis = testRedis();
  await deletePrefix(redis, prefix);
  await deletePrefix(redis, `{${prefix}-bull}`);
  redis.disconnect();
});

async function readyz(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${url}/readyz`);
  return { status: response.status, body: await response.text() };
}

describe('when callgate runs the drachtio driver', () => {
  it(
    'should be ready, and say so, only while drachtio-server accepts its connection',
    { timeout: 60_000 },
    async () => {
      server = await DrachtioWireServer.start({ secret: SECRET });
      // drachtio-server is not there yet when callgate starts.
      await server.stopListening();
      const setup = writeCallgateConfig({
        script: { name: 'drachtio-readiness', greeting: 'Hello.', fallback: 'Yes?' },
        overrides: (config) => {
          config.sip = {
            ...(config.sip as Record<string, unknown>),
            driver: 'drachtio',
            drachtio: { host: '127.0.0.1', port: server?.clientPort, reconnectMs: 200 },
          };
        },
      });
      prefix = setup.prefix;
      const httpPort = await freeLoopbackPort();
      const url = `http://127.0.0.1:${httpPort}`;
      const sipPort = await freeSipPort();
      proc = startTs('gateway/main.ts', {
        env: {
          CALLGATE_CONFIG: setup.configPath,
          CALLGATE_HTTP_PORT: String(httpPort),
          CALLGATE__http__operator__port: '0',
          [TEST_OPERATOR_TOKEN_ENV]: TEST_OPERATOR_TOKEN,
          CALLGATE_SIP_PORT: String(sipPort),
          CALLGATE_SIP_TCP_PORT: String(sipPort),
          REDIS_URL: testRedisUrl(),
          CALLGATE__redis__prefix: setup.prefix,
          OPENAI_API_KEY: '',
          DRACHTIO_SECRET: SECRET,
        },
      });
      const started = proc;
      await waitFor(
        async () => (started.stdout().includes('waiting for the SIP driver') ? true : undefined),
        30_000,
        'the started line',
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${started.output().slice(-3_000)}`);
      });
      const down = await readyz(url);
      expect(down.status).toBe(503);
      expect(down.body).toContain('not connected to drachtio-server');
      expect(started.stdout()).not.toContain('callgate ready');

      await server.listen();
      await waitFor(
        async () => (started.stdout().includes('callgate ready') ? true : undefined),
        10_000,
        'callgate ready',
      );
      expect((await readyz(url)).status).toBe(200);

      // The secret changes under it: the reconnect is refused, and readiness says why.
      server.setSecret('another');
      server.dropClients();
      await waitFor(
        async () => {
          const now = await readyz(url);
          return now.status === 503 && now.body.includes('refused the shared secret')
            ? true
            : undefined;
        },
        5_000,
        'not ready with the secret refused',
      );
      expect(started.stdout()).toContain('drachtio-server refused the shared secret');
    },
  );
});
