import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../config/load.ts';

/** A valid document whose one tenant's `notify` (and the sandbox settings) each case sets. */
function document(
  notify: Record<string, unknown> | undefined,
  sandbox: Record<string, unknown> = { enabled: true },
): Record<string, unknown> {
  return {
    sandbox,
    providers: {
      bookings: { type: 'sandbox', service: 'bookings', baseUrl: 'http://127.0.0.1:8090' },
    },
    tenants: [
      {
        id: 'demo',
        numbers: ['1000'],
        agent: 'concierge',
        trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
        ...(notify && { notify }),
      },
    ],
  };
}

function problemsOf(doc: unknown): readonly string[] {
  try {
    loadConfig({ document: doc, env: {} });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const SMS_API = {
  type: 'http',
  url: 'https://sms.example.test/v1/messages',
  tokenEnv: 'SMS_API_TOKEN',
  body: '{"to":"{to}","text":"{text}","reference":"{operation_id}"}',
};
const WEBHOOK = { webhookUrl: 'https://example.test/hook', webhookSecretEnv: 'HOOK_SECRET' };
const NO_SANDBOX = { enabled: false };

describe('when a tenant’s out-of-band channels cannot deliver', () => {
  const refused: [
    string,
    Record<string, unknown> | undefined,
    Record<string, unknown> | undefined,
    string,
  ][] = [
    [
      'SMS through the sandbox (the default) where no sandbox runs',
      undefined,
      NO_SANDBOX,
      'tenants[0].notify.sms: sends SMS through the sandbox, which does not run here',
    ],
    [
      'SMS through the sandbox beside a webhook where no sandbox runs',
      { ...WEBHOOK, sms: 'sandbox' },
      NO_SANDBOX,
      'tenants[0].notify.sms: sends SMS through the sandbox',
    ],
    ['no channel at all', { sms: 'none' }, undefined, 'tenants[0].notify: no out-of-band channel'],
    [
      'an opt-out that still names a webhook',
      { outOfBand: false, ...WEBHOOK },
      undefined,
      'tenants[0].notify.webhookUrl: is never used: outOfBand is false',
    ],
    [
      'an SMS API without a token variable',
      { sms: { ...SMS_API, tokenEnv: undefined } },
      undefined,
      'tenants[0].notify.sms',
    ],
    [
      'an SMS API token in the file',
      { sms: { ...SMS_API, token: 'sk_live_1' } },
      undefined,
      'tenants[0].notify.sms',
    ],
    [
      'an SMS API that is not http',
      { sms: { ...SMS_API, url: 'ftp://sms.example.test/' } },
      undefined,
      'tenants[0].notify.sms',
    ],
    [
      'an SMS template with an unknown placeholder',
      { sms: { ...SMS_API, body: '{"to":"{to}","text":"{text}","x":"{amount}"}' } },
      undefined,
      'tenants[0].notify.sms.body: unknown placeholder {amount}',
    ],
    [
      'an SMS template without the text',
      { sms: { ...SMS_API, body: '{"to":"{to}"}' } },
      undefined,
      'tenants[0].notify.sms.body: must contain {text}',
    ],
    [
      'an SMS template that is not JSON',
      { sms: { ...SMS_API, body: 'to={to}&text={text}' } },
      undefined,
      'tenants[0].notify.sms.body: is not JSON once its placeholders are filled',
    ],
    [
      'a retry delay above its cap',
      { ...WEBHOOK, retry: { backoffMs: 10_000, maxBackoffMs: 1_000 } },
      undefined,
      'tenants[0].notify.retry.backoffMs: must not be above retry.maxBackoffMs',
    ],
  ];

  it.each(refused)('should refuse %s, naming the path', (_name, notify, sandbox, expected) => {
    const problems = problemsOf(document(notify, sandbox));
    expect(
      problems.some((p) => p.startsWith(expected)),
      `problems were:\n${problems.join('\n')}`,
    ).toBe(true);
  });
});

describe('when a tenant’s out-of-band channels can deliver, or it opts out', () => {
  const accepted: [
    string,
    Record<string, unknown> | undefined,
    Record<string, unknown> | undefined,
  ][] = [
    ['the default (SMS through the embedded sandbox)', undefined, undefined],
    [
      'SMS through a sandbox running elsewhere',
      { sms: 'sandbox' },
      { enabled: false, url: 'http://sandbox:8090' },
    ],
    ['a webhook alone', { ...WEBHOOK, sms: 'none' }, NO_SANDBOX],
    ['an SMS API', { sms: SMS_API }, NO_SANDBOX],
    [
      'an SMS API taking a form',
      {
        sms: {
          ...SMS_API,
          contentType: 'application/x-www-form-urlencoded',
          body: 'To={to}&Body={text}',
        },
      },
      NO_SANDBOX,
    ],
    ['an explicit opt-out without a sandbox', { outOfBand: false }, NO_SANDBOX],
  ];

  it.each(accepted)('should accept %s', (_name, notify, sandbox) => {
    expect(problemsOf(document(notify, sandbox))).toEqual([]);
  });
});
