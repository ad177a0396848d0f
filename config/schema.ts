/**
 * The whole callgate configuration as one zod schema. Every other module reads its settings from
 * the parsed `Config`; nothing reads environment variables for settings on its own (secrets are
 * the exception: they are named here by the variable that holds them and read at the edge).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { agentsIssues, agentsSchema } from './agents-schema.ts';

/** Ports: 0 means "any free port", which tests and the embedded sandbox use. */
const port = z.int().min(0).max(65535);
const listenAddress = z.union([z.ipv4(), z.ipv6()]);

/** Ids that become parts of Redis keys and BullMQ job ids: no ':' and not purely numeric. */
const safeId = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,62}$/,
    'must start with a letter and use only a-z, 0-9, _ and - (at most 63 characters)',
  );

/** An argument name as tools declare them (JSON Schema property names of tool parameters). */
const fieldName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
    'must be a plain argument name (letters, digits, _; at most 64 characters)',
  );

const envName = z
  .string()
  .regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name (A-Z, 0-9, _)');

const cidr = z.string().refine((value) => isCidr(value), {
  message: 'must be an IPv4 or IPv6 address or CIDR block (e.g. 192.0.2.0/24)',
});

/** A SHA-256 certificate fingerprint: 32 hex bytes, with or without ':' between them. */
const sha256Fingerprint = z
  .string()
  .regex(
    /^(?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$|^[0-9A-Fa-f]{64}$/,
    'must be a SHA-256 fingerprint (64 hex digits, optionally in pairs separated by :)',
  );

/**
 * The TLS listener's identity and limits. Certificate and key are PEM files, read at load (an
 * unreadable one is a configuration error) and read again when they change, without a restart.
 */
export const sipTlsSchema = z.strictObject({
  /** PEM certificate (chain) callgate presents, on its listener and on connections it opens. */
  certFile: z.string().min(1),
  /** PEM private key of certFile. */
  keyFile: z.string().min(1),
  /** PEM CA bundle verifying peers callgate connects to without a tenant's own; system CAs when unset. */
  caFile: z.string().min(1).optional(),
  /** A connection that has not finished its TLS handshake this long after it opened is closed. */
  handshakeTimeoutMs: z.int().min(100).max(60_000).default(5_000),
  /** Open TLS connections from one source address; one more is closed at once. */
  maxConnectionsPerSource: z.int().min(1).max(10_000).default(64),
  /** Connections from one source still in their handshake; one more is closed at once. */
  maxHandshakesPerSource: z.int().min(1).max(10_000).default(8),
  /** How often certFile and keyFile are checked for a change (polling follows a Secret's symlinks). */
  reloadIntervalMs: z.int().min(100).max(3_600_000).default(10_000),
});

export const sipSchema = z.strictObject({
  driver: z.enum(['builtin', 'drachtio']).default('builtin'),
  listen: listenAddress.default('127.0.0.1'),
  /** The address put in Contact and Via; defaults to `listen`. */
  advertisedAddress: z.string().min(1).optional(),
  udpPort: port.default(5060),
  tcpPort: port.default(5060),
  transports: z
    .array(z.enum(['udp', 'tcp', 'tls']))
    .min(1)
    .default(['udp', 'tcp']),
  /** Largest SIP message accepted, headers and body together. */
  maxMessageBytes: z.int().min(1024).max(1_048_576).default(65_535),
  /** UDP socket receive buffer; large enough that a burst of INVITEs is not dropped by the kernel. */
  udpReceiveBufferBytes: z.int().min(65_536).max(268_435_456).default(8_388_608),
  tcpIdleTimeoutMs: z.int().min(1000).default(120_000),
  /** INVITEs per second per source address before answering 503. */
  inviteRatePerSource: z.number().positive().default(1000),
  /** Failed authentications per minute per source before its INVITEs are answered 503 with Retry-After. */
  authFailuresPerMinute: z.int().positive().default(30),
  // ---- SIP over TLS (RFC 3261 section 26) ----
  /** The TLS listener's port, when `transports` lists tls. */
  tlsPort: port.default(5061),
  /** SIP over TLS: required when `transports` lists tls (gateway/sip/tls-transport.ts). */
  tls: sipTlsSchema.optional(),
  drachtio: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: port.default(9022),
      secretEnv: envName.default('DRACHTIO_SECRET'),
      /** First wait before reconnecting to drachtio-server (lost or refused); doubles up to 30 s. */
      reconnectMs: z.int().min(100).default(2000),
    })
    .default({ host: '127.0.0.1', port: 9022, secretEnv: 'DRACHTIO_SECRET', reconnectMs: 2000 }),
});

export const rtpSchema = z.strictObject({
  listen: listenAddress.default('127.0.0.1'),
  advertisedAddress: z.string().min(1).optional(),
  portMin: port.default(20000),
  portMax: port.default(29999),
  /** No RTP for this long (outside hold) ends the call. */
  mediaTimeoutMs: z.int().min(1000).default(30_000),
  /** Send comfort silence between talk spurts instead of no packets. */
  comfortSilence: z.boolean().default(false),
  /**
   * A stall of the process this long (paused, starved of CPU) drops what the agent was saying
   * instead of resuming it mid-word; a result cut so is said again if still due. Below
   * gateway.deadAfterMs - gateway.heartbeatMs, so a stall that may have let a janitor take a
   * result over never lets the rest of it play.
   */
  stallCutMs: z.int().min(100).max(60_000).default(2_000),
  jitterMinMs: z.int().min(0).default(20),
  jitterMaxMs: z.int().min(20).default(200),
  /**
   * RTP sockets: `native` through callgate's native module (batched receive, direct sends: less
   * CPU per packet, see bench/RESULTS.md), `node` through Node's dgram, `auto` native where the
   * module is built (npm run build:native) and dgram with a warning where it is not.
   */
  sockets: z.enum(['auto', 'native', 'node']).default('auto'),
});

/** What an operator token may do; each operator route needs one (jobs/http/operator-routes.ts). */
export const operatorScopes = [
  'operations:read',
  'operations:write',
  'calls:read',
  'admin',
] as const;
export type OperatorScope = (typeof operatorScopes)[number];

export const operatorTokenSchema = z.strictObject({
  /** Named in the log line of every write made with the token. */
  name: safeId,
  /** The environment variable holding the token (the chart's Secret: CALLGATE_TOKEN_<NAME>). */
  tokenEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name'),
  scopes: z.array(z.enum(operatorScopes)).min(1),
});

export const operatorHttpSchema = z.strictObject({
  listen: listenAddress.default('127.0.0.1'),
  port: port.default(8081),
  /** None on a loopback listener: the operator API runs open (and says so at start). */
  tokens: z.array(operatorTokenSchema).default([]),
});

export const httpSchema = z.strictObject({
  /** Probes and metrics only (/healthz, /readyz, /metrics): no caller data. */
  listen: listenAddress.default('127.0.0.1'),
  port: port.default(8080),
  /** The operator API: operations, calls, timelines, reconcile, re-drive, reload. */
  operator: operatorHttpSchema.default(operatorHttpSchema.parse({})),
});

/** 127.0.0.0/8 and ::1: only processes on this machine can connect. */
export function isLoopbackAddress(address: string): boolean {
  return address === '::1' || /^127\./.test(address) || address.startsWith('::ffff:127.');
}

export const redisSchema = z.strictObject({
  /** Unset: callgate starts a private redis-server on a free loopback port. */
  url: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  /** Prefix for every key callgate writes, so several deployments can share one Redis. */
  prefix: safeId.default('callgate'),
  /**
   * How a mutation's admission is made durable before the caller is told it started (else it is
   * taken back and answered busy), and the "sending" mark of its attempt before the request leaves (a
   * Redis node lost before it persisted the mark would otherwise let the attempt be sent twice, or
   * be cancelled as never sent): `replica` waits for `replicas` replicas to acknowledge it (WAIT),
   * `fsync` requires the server to run with appendonly yes and appendfsync always (checked), `none`
   * trusts a single Redis whose loss loses the whole ledger anyway (the embedded default).
   * A mark that cannot be made durable within `timeoutMs` is not sent: the attempt is retried.
   */
  durability: z
    .strictObject({
      mode: z.enum(['none', 'replica', 'fsync']).default('none'),
      replicas: z.int().min(1).max(16).default(1),
      timeoutMs: z.int().min(10).max(60_000).default(1_000),
    })
    .default({ mode: 'none', replicas: 1, timeoutMs: 1_000 }),
});

export const logSchema = z.strictObject({
  level: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
});

export const modelSchema = z.strictObject({
  /** `auto`: OpenAI when the key variable is set, the local simulator otherwise. */
  provider: z.enum(['auto', 'openai', 'simulator']).default('auto'),
  openai: z
    .strictObject({
      url: z
        .string()
        .regex(/^wss?:\/\//, 'must be a ws:// or wss:// URL')
        .default('wss://api.openai.com/v1/realtime'),
      model: z.string().min(1).default('gpt-realtime'),
      voice: z.string().min(1).default('marin'),
      apiKeyEnv: envName.default('OPENAI_API_KEY'),
    })
    .default({
      url: 'wss://api.openai.com/v1/realtime',
      model: 'gpt-realtime',
      voice: 'marin',
      apiKeyEnv: 'OPENAI_API_KEY',
    }),
  simulator: z
    .strictObject({
      /** Path of a simulator script; the bundled demo script when unset. */
      script: z.string().min(1).optional(),
    })
    .default({}),
});

export const ledgerSchema = z.strictObject({
  /** How long finished operations are kept. The floor of 7 days is a product promise. */
  retentionDays: z.int().min(7).default(30),
  /** Money-moving operations are kept longer (refund disputes arrive months later). */
  moneyRetentionDays: z.int().min(7).default(400),
});

/** Call records (`{prefix}:call:<id>`) are kept this long after the call ended. */
export const CALL_RECORDS_TTL_DEFAULT_SECONDS = 7 * 86_400;
/** A call's own events (`{prefix}:call:<id>:events`, what the agent said included) likewise. */
export const TIMELINE_TTL_DEFAULT_SECONDS = 7 * 86_400;
/** The audit trail (`{prefix}:audit:<id>`: tool requests with their arguments, gate decisions). */
export const AUDIT_TTL_DEFAULT_SECONDS = 30 * 86_400;

/**
 * What callgate keeps about a caller and what it shows (docs/runbook.md, "What callgate stores
 * about a caller"). Operations keep the ledger's retention (`ledger`), not these.
 */
export const privacySchema = z.strictObject({
  /** Caller numbers in log lines and in the calls API are masked (`+3467****12`); stored data is not. */
  maskCallerNumbers: z.boolean().default(false),
  callRecordsTtlSeconds: z.int().min(1).default(CALL_RECORDS_TTL_DEFAULT_SECONDS),
  timelineTtlSeconds: z.int().min(1).default(TIMELINE_TTL_DEFAULT_SECONDS),
  auditTtlSeconds: z.int().min(1).default(AUDIT_TTL_DEFAULT_SECONDS),
});

export const providerSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('sandbox'),
    /** Which sandbox service the provider talks to. */
    service: z.enum(['bookings', 'payments']),
    /** Base URL of a sandbox already running; unset: the embedded sandbox. */
    baseUrl: z.url().optional(),
    timeoutMs: z.int().min(10).default(5000),
  }),
  z.strictObject({
    type: z.literal('http'),
    baseUrl: z.url(),
    /** Whether the system of record dedupes requests by the Idempotency-Key header. */
    honoursIdempotencyKeys: z.boolean(),
    supportsCancel: z.boolean().default(false),
    /** Whether GET {baseUrl}/operations/{id} answers; without it an UNKNOWN operation needs an operator. */
    supportsLookup: z.boolean().default(true),
    /**
     * Whether POST {baseUrl}/operations/{id}/void voids attempts by their tokens (jobs/providers/
     * http-provider.ts). Without it or idempotency keys, an UNKNOWN operation the provider has no
     * record of stays UNKNOWN for an operator: a request still on its way could take effect later.
     */
    supportsVoid: z.boolean().default(false),
    timeoutMs: z.int().min(10).default(10_000),
    /** Environment variable holding a bearer token for the system of record, if any. */
    tokenEnv: envName.optional(),
  }),
]);

export const retrySchema = z.strictObject({
  maxAttempts: z.int().min(1).max(100).default(5),
  backoffMs: z.int().min(1).default(200),
  maxBackoffMs: z.int().min(1).default(10_000),
  /** Retries may be at most this fraction of requests over the window (a retry storm guard). */
  budgetRatio: z.number().min(0).max(10).default(0.2),
  budgetWindowSeconds: z.int().min(1).default(60),
  /** Retries always allowed per window, so a quiet action can still retry. */
  budgetMinRetries: z.int().min(0).default(10),
});

export const actionSchema = z.strictObject({
  kind: z.enum(['read', 'mutation']),
  /** Name of an entry in `providers`. */
  provider: safeId,
  /** Operation name at the provider (e.g. `book`, `refund`); defaults to the action name. */
  operation: z.string().min(1).optional(),
  maxConcurrent: z.int().min(1).max(10_000).default(4),
  maxQueued: z.int().min(0).max(1_000_000).default(100),
  /** A queued request not admitted within this time is rejected. */
  admissionDeadlineMs: z.int().min(1).default(5000),
  /** After this the operation is no longer worth doing (no more retries). */
  deadlineMs: z.int().min(100).default(60_000),
  policy: z.enum(['reject', 'queue', 'coalesce', 'degrade']).default('queue'),
  /** The fallback `degrade` answers with (a cached answer or a promise of a later message). */
  fallback: z.string().min(1).optional(),
  /** Overrides what the provider declares about honouring idempotency keys. */
  providerIdempotent: z.boolean().optional(),
  /**
   * The arguments that make two requests of a mutation the same intent (refund: `[order_id,
   * amount_cents]`): the idempotency key and the conflict check cover these only, so free text
   * and control flags (`reason`, `confirmed`) never start a second operation. `all`: every
   * argument. Unset: the intent fields the tool declares, or every argument if it declares none.
   */
  intent: z.union([z.literal('all'), z.array(fieldName).min(1).max(32)]).optional(),
  /** Money-moving: kept for `ledger.moneyRetentionDays`. */
  money: z.boolean().default(false),
  /** Above this amount the caller must confirm explicitly (billing actions). */
  confirmAbove: z.number().min(0).optional(),
  retry: retrySchema.default({
    maxAttempts: 5,
    backoffMs: 200,
    maxBackoffMs: 10_000,
    budgetRatio: 0.2,
    budgetWindowSeconds: 60,
    budgetMinRetries: 10,
  }),
});

/**
 * How a tenant's trunk proves who may call its numbers: a source allowlist, digest authentication,
 * mutual TLS (`tenants[].tls.mutual`), or an explicit `open: true`. A tenant that names none is
 * refused at load (`trunkIssues` below, checked per tenant since mutual TLS lives beside the trunk),
 * so a public listener never answers (and pays a model session for) a scanner's call
 * (test/unit/config/trunk-closed-by-default.test.ts).
 */
export const trunkSchema = z.strictObject({
  /** Source addresses (CIDR) allowed to send INVITEs for this tenant's numbers. */
  allowFrom: z.array(cidr).default([]),
  digest: z
    .strictObject({
      realm: z.string().min(1),
      username: z.string().min(1),
      passwordEnv: envName,
    })
    .optional(),
  /** Takes calls from any source without authentication; logged as a warning on a public listener. */
  open: z.boolean().default(false),
  /**
   * The trunk is a trust domain (RFC 3325): its P-Asserted-Identity names the caller, who then
   * counts as verified (gateway/sip/caller-identity.ts). Off: the caller is From's user.
   */
  trustAssertedIdentity: z.boolean().default(false),
});

/** The closed-by-default rule over a tenant's trunk and its mutual TLS; paths under the tenant. */
function trunkIssues(
  trunk: z.infer<typeof trunkSchema>,
  mutualTls: boolean,
): { path: string[]; message: string }[] {
  const issues: { path: string[]; message: string }[] = [];
  const authenticates = trunkAuthenticates(trunk) || mutualTls;
  // Anyone could assert any number to a trunk that neither checks addresses nor authenticates.
  if (trunk.trustAssertedIdentity && !authenticates)
    issues.push({
      path: ['trunk', 'trustAssertedIdentity'],
      message:
        'needs allowFrom, digest or tls.mutual: an identity is trusted only from a known trunk',
    });
  if (!trunk.open && !authenticates)
    issues.push({
      path: ['trunk'],
      message:
        'must say who may call: set trunk.allowFrom (source addresses), trunk.digest (SIP digest authentication), tls.mutual (client certificates), or trunk.open: true (calls from anyone)',
    });
  if (trunk.open && authenticates)
    issues.push({
      path: ['trunk', 'open'],
      message:
        'contradicts allowFrom/digest/tls.mutual: drop open, or drop allowFrom, digest and tls.mutual',
    });
  return issues;
}

/** A trunk that names its callers (by address or by credentials), as opposed to an open one. */
function trunkAuthenticates(trunk: {
  readonly allowFrom: readonly string[];
  readonly digest?: unknown;
}): boolean {
  return trunk.allowFrom.length > 0 || trunk.digest !== undefined;
}

/** What an HTTP SMS template may name; each is filled from the out-of-band message. */
export const SMS_TEMPLATE_FIELDS = [
  'to',
  'text',
  'operation_id',
  'tenant_id',
  'session_id',
  'state',
] as const;

/** A generic SMS API: one templated POST per message, authenticated with a bearer token. */
export const httpSmsSchema = z.strictObject({
  type: z.literal('http'),
  url: z.url({ protocol: /^https?$/ }),
  /** Environment variable holding the bearer token (never the token itself). */
  tokenEnv: envName,
  /**
   * The request body with `{to}`, `{text}`, `{operation_id}`, `{tenant_id}`, `{session_id}`,
   * `{state}` placeholders, escaped for `contentType` (JSON string content, or form-encoded).
   */
  body: z.string().min(1),
  contentType: z
    .enum(['application/json', 'application/x-www-form-urlencoded'])
    .default('application/json'),
  timeoutMs: z.int().min(100).max(60_000).default(5_000),
});

export const notifyRetrySchema = z.strictObject({
  /** Sends per channel before the message is given up (then re-driven, see docs/out-of-band.md). */
  attempts: z.int().min(1).max(100).default(16),
  /** First retry delay; each next one doubles, up to maxBackoffMs. */
  backoffMs: z.int().min(1).default(2_000),
  maxBackoffMs: z.int().min(1).default(300_000),
});

export const notifySchema = z.strictObject({
  /** false: this tenant sends nothing out of band (a result the caller can no longer hear is only recorded). */
  outOfBand: z.boolean().default(true),
  /** Signed (HMAC-SHA256) webhook for out-of-band results. */
  webhookUrl: z.url().optional(),
  webhookSecretEnv: envName.optional(),
  /** SMS: `none`, `sandbox` (the sandbox's message sink) or an HTTP SMS API. */
  sms: z.union([z.enum(['none', 'sandbox']), httpSmsSchema]).default('sandbox'),
  /** Per-channel retries; the defaults keep trying for 35 to 45 minutes (15 delays: 2 s doubling to 5 min, less up to a fifth). */
  retry: notifyRetrySchema.default(notifyRetrySchema.parse({})),
});

/**
 * A trunk's TLS identity: its certificates chain to `caFile` and carry `name` or `fingerprint`.
 * Checked on connections callgate opens to the trunk and, with `mutual`, on the client
 * certificate of every call it sends (gateway/sip/tls-peer-match.ts).
 */
export const tenantTlsSchema = z
  .strictObject({
    /** PEM CA bundle the trunk's certificates chain to. */
    caFile: z.string().min(1),
    /** A DNS name or IP address the trunk's certificate names (subjectAltName, else CN). */
    name: z.string().min(1).optional(),
    /** SHA-256 fingerprint of the trunk's certificate. */
    fingerprint: sha256Fingerprint.optional(),
    /**
     * Mutual TLS as trunk authentication: an INVITE counts as the tenant's only when it came
     * over TLS with a client certificate that verifies as above; any other gets 403.
     */
    mutual: z.boolean().default(false),
  })
  .refine((tls) => tls.name !== undefined || tls.fingerprint !== undefined, {
    message: 'must name the trunk: set name (its certificate name) or fingerprint (SHA-256)',
  });

export const tenantSchema = z
  .strictObject({
    id: safeId,
    name: z.string().min(1).optional(),
    numbers: z
      .array(
        z
          .string()
          .regex(/^\+?[0-9*#]{1,32}$/, 'must be a dialable number (digits, optional leading +)'),
      )
      .min(1),
    /** The agent that answers this tenant's calls (a name in `agents.list`). */
    agent: safeId,
    /** The realtime model of this tenant's calls, unless its agent names one; defaults to model.openai.model. */
    model: z.string().min(1).optional(),
    // Parsed even when absent, so a tenant without a trunk is told the ways to name its callers.
    trunk: trunkSchema.prefault({}),
    /** SIP URI a call is transferred to when the caller asks for a human. */
    transferTarget: z
      .string()
      .regex(/^(sips?|tel):/, 'must be a sip:, sips: or tel: URI')
      .optional(),
    /** Codec preference when answering offers; G722 (wideband, static PT 9) only when listed. */
    codecs: z
      .array(z.enum(['PCMU', 'PCMA', 'G722', 'opus']))
      .min(1)
      .default(['PCMU', 'PCMA', 'opus']),
    /**
     * SRTP (RFC 3711, keys by SDES a=crypto): `off` answers plain RTP/AVP only, `optional` answers
     * RTP/SAVP and RTP/AVP offers, `required` refuses plain offers with 488 and offers RTP/SAVP.
     */
    srtp: z.enum(['off', 'optional', 'required']).default('off'),
    /** The trunk's TLS identity: verifies its certificate, and with `mutual` authenticates its calls. */
    tls: tenantTlsSchema.optional(),
    /** Where this tenant's call media may come from, besides what each call's signaling names. */
    media: z
      .strictObject({
        /**
         * Address ranges (CIDR) that may send a call's RTP besides the SDP's address and the
         * INVITE's source: carriers whose media servers are other hosts than their SIP proxies.
         * RTP from anywhere else is dropped and never receives the call's audio.
         */
        allowFrom: z.array(cidr).default([]),
      })
      .prefault({}),
    /**
     * Calls of this tenant one gateway holds at once (calls being set up included); one more gets
     * 486 Busy Here. Counted per gateway, not across gateways (docs/configuration.md). Unset: only
     * gateway.maxCalls applies.
     */
    maxCalls: z.int().min(1).max(100_000).optional(),
    /** At most this many tools of one call run at once. */
    maxToolsPerSession: z.int().min(1).max(64).default(4),
    notify: notifySchema.default(notifySchema.parse({})),
    actions: z.record(safeId, actionSchema).default({}),
    /**
     * Answer this tenant's numbers with a media test instead of the agent: `echo` plays back what
     * the caller sends (audio and digits), `record` keeps it in `recordDir` (WAV + JSON per call).
     */
    mediaTest: z
      .strictObject({
        mode: z.enum(['echo', 'record']),
        recordDir: z.string().min(1).default(join(tmpdir(), 'callgate-media-test')),
      })
      .optional(),
  })
  .superRefine((tenant, ctx) => {
    for (const issue of trunkIssues(tenant.trunk, tenant.tls?.mutual === true))
      ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
  });

export const sandboxSchema = z.strictObject({
  /** Start the bundled sandbox systems of record inside callgate (the embedded default). */
  enabled: z.boolean().default(true),
  listen: listenAddress.default('127.0.0.1'),
  port: port.default(0),
  /**
   * Base URL of a sandbox running elsewhere (its own Deployment), for workers when `enabled` is
   * false: the SMS sink and sandbox providers without a baseUrl use it.
   */
  url: z.url({ protocol: /^https?$/ }).optional(),
});

export const gatewaySchema = z.strictObject({
  /** Identifies this gateway in the session registry; defaults to host name and pid. */
  id: safeId.optional(),
  heartbeatMs: z.int().min(100).default(2000),
  /** A gateway silent for this long is considered gone and its results go out of band. */
  deadAfterMs: z.int().min(500).default(10_000),
  /** How long SIGTERM waits for calls and jobs to finish. */
  drainMs: z.int().min(0).default(10_000),
  /**
   * Scheduling priority (nice value) of the gateway's event loop thread, which carries SIP, RTP
   * and the model streams. A negative value puts the loop ahead of the other threads of its
   * scheduling group (its cgroup or session), not of other containers; below the value the process
   * started with it needs CAP_SYS_NICE (or a matching RLIMIT_NICE). Unset: left as started.
   */
  nice: z.int().min(-20).max(19).optional(),
  /**
   * Calls this gateway holds at once, calls being set up (ringing while their model opens)
   * included; one more INVITE gets 503 with Retry-After (gateway/call/call-admission.ts).
   */
  maxCalls: z.int().min(1).max(100_000).default(200),
  /**
   * Above this event loop delay (p90 over the last second, in ms; gateway/call/event-loop-delay.ts)
   * new calls get 503 with Retry-After: the loop paces every call's audio, and a late loop is
   * heard on all of them.
   */
  maxEventLoopDelayMs: z.int().min(10).max(10_000).default(250),
  /**
   * How long a caller hears ringing while the media ports and the model session are opened; past
   * it the call is refused with 503 (never answered and then dropped). Far below the SIP stack's
   * own answer deadline (240 * T1, gateway/sip/sip-timers.ts).
   */
  setupTimeoutMs: z.int().min(100).max(60_000).default(5_000),
  /** The Retry-After (seconds) of every 503 a refused call gets. */
  retryAfterSeconds: z.int().min(1).max(3_600).default(5),
});

export const workerSchema = z.strictObject({
  /** Jobs one worker process runs at once per execution queue. */
  concurrency: z.int().min(1).max(1000).default(16),
  /** BullMQ job lock; a worker that stops renewing it for this long is considered stalled. */
  lockDurationMs: z.int().min(500).default(30_000),
  /** How often stalled jobs are looked for. */
  stalledIntervalMs: z.int().min(200).default(15_000),
  /** Tenant concurrency lease lifetime: above lockDurationMs so a live job never loses its lease. */
  leaseTtlMs: z.int().min(1000).default(60_000),
  /** "Not found" from a provider is trusted only this long after sending (above provider timeouts). */
  reconcileGraceMs: z.int().min(0).default(15_000),
  reconcileBackoffMs: z.int().min(10).default(1_000),
  reconcileMaxBackoffMs: z.int().min(10).default(60_000),
  /** How often the recovery sweep looks for operations whose job was lost. */
  sweepIntervalMs: z.int().min(100).default(5_000),
  /** An open operation untouched for this long is checked against its job. */
  staleAfterMs: z.int().min(100).default(30_000),
});

export const configSchema = z
  .strictObject({
    sip: sipSchema.default(sipSchema.parse({})),
    rtp: rtpSchema.default(rtpSchema.parse({})),
    http: httpSchema.default(httpSchema.parse({})),
    redis: redisSchema.default(redisSchema.parse({})),
    log: logSchema.default(logSchema.parse({})),
    model: modelSchema.default(modelSchema.parse({})),
    ledger: ledgerSchema.default(ledgerSchema.parse({})),
    privacy: privacySchema.default(privacySchema.parse({})),
    gateway: gatewaySchema.default(gatewaySchema.parse({})),
    sandbox: sandboxSchema.default(sandboxSchema.parse({})),
    worker: workerSchema.default(workerSchema.parse({})),
    providers: z.record(safeId, providerSchema).default({}),
    tenants: z.array(tenantSchema).default([]),
    /**
     * Agents and their tools. A configuration without it runs workers only: a gateway refuses to
     * start while a tenant names an agent it does not have.
     */
    agents: agentsSchema.optional(),
  })
  .superRefine((config, ctx) => {
    for (const issue of agentsIssues(config))
      ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
    if (config.rtp.portMin > config.rtp.portMax) {
      ctx.addIssue({
        code: 'custom',
        path: ['rtp', 'portMin'],
        message: `must not be above rtp.portMax (${config.rtp.portMax})`,
      });
    }
    if (config.rtp.portMin % 2 !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['rtp', 'portMin'],
        message: 'must be even (RTP uses even ports, RTCP the odd one above)',
      });
    }
    if (config.sandbox.enabled && config.sandbox.url !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['sandbox', 'url'],
        message:
          'names a sandbox running elsewhere: set sandbox.enabled to false, or drop the url to use the embedded one',
      });
    }
    if (config.rtp.stallCutMs >= config.gateway.deadAfterMs - config.gateway.heartbeatMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['rtp', 'stallCutMs'],
        message: `must be below gateway.deadAfterMs - gateway.heartbeatMs (${config.gateway.deadAfterMs - config.gateway.heartbeatMs}): a longer stall may have let a janitor take a result over`,
      });
    }
    if (config.rtp.jitterMinMs > config.rtp.jitterMaxMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['rtp', 'jitterMinMs'],
        message: 'must not be above rtp.jitterMaxMs',
      });
    }
    if (config.gateway.deadAfterMs < 3 * config.gateway.heartbeatMs) {
      // A janitor back from a cut-off needs a gap of unbroken contact below deadAfterMs - 2 heartbeats (janitor.ts).
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'deadAfterMs'],
        message: `must be at least 3 times gateway.heartbeatMs (${config.gateway.heartbeatMs})`,
      });
    }
    const owners = new Map<string, number>();
    const tenantIds = new Map<string, number>();
    config.tenants.forEach((tenant, t) => {
      const first = tenantIds.get(tenant.id);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', t, 'id'],
          message: `duplicate tenant id ${tenant.id} (also tenants[${first}])`,
        });
      } else {
        tenantIds.set(tenant.id, t);
      }
      tenant.numbers.forEach((number, n) => {
        const owner = owners.get(number);
        if (owner !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: ['tenants', t, 'numbers', n],
            message: `number ${number} is already owned by tenants[${owner}]`,
          });
        } else {
          owners.set(number, t);
        }
      });
      for (const [name, action] of Object.entries(tenant.actions)) {
        const at = ['tenants', t, 'actions', name];
        if (action.policy === 'coalesce' && action.kind !== 'read') {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'policy'],
            message: 'coalesce is only allowed for read actions',
          });
        }
        if (action.policy === 'degrade' && action.fallback === undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'fallback'],
            message: 'the degrade policy needs a fallback',
          });
        }
        if (!(action.provider in config.providers)) {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'provider'],
            message: `unknown provider ${action.provider}`,
          });
        }
        if (action.retry.backoffMs > action.retry.maxBackoffMs) {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'retry', 'backoffMs'],
            message: 'must not be above retry.maxBackoffMs',
          });
        }
        if (action.intent !== undefined && action.kind === 'read') {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'intent'],
            message:
              'only mutations declare intent fields (identical reads are coalesced on all their arguments)',
          });
        }
        if (Array.isArray(action.intent)) {
          const seen = new Set<string>();
          action.intent.forEach((field, f) => {
            if (seen.has(field))
              ctx.addIssue({
                code: 'custom',
                path: [...at, 'intent', f],
                message: `${field} is named twice`,
              });
            seen.add(field);
          });
        }
        if (action.admissionDeadlineMs > action.deadlineMs) {
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'admissionDeadlineMs'],
            message: 'must not be above deadlineMs',
          });
        }
      }
      if (tenant.notify.webhookUrl !== undefined && tenant.notify.webhookSecretEnv === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', t, 'notify', 'webhookSecretEnv'],
          message: 'a webhook needs a signing secret',
        });
      }
      for (const issue of notifyIssues(tenant.notify, config.sandbox))
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', t, 'notify', ...issue.path],
          message: issue.message,
        });
    });
    const usedPorts = new Map<string, string>();
    const claim = (key: string, where: string, path: (string | number)[]) => {
      const prior = usedPorts.get(key);
      if (prior !== undefined) {
        ctx.addIssue({ code: 'custom', path, message: `port already used by ${prior}` });
      } else {
        usedPorts.set(key, where);
      }
    };
    for (const [name, provider] of Object.entries(config.providers)) {
      if (config.worker.reconcileGraceMs <= provider.timeoutMs) {
        ctx.addIssue({
          code: 'custom',
          path: ['worker', 'reconcileGraceMs'],
          message: `must be above providers.${name}.timeoutMs (${provider.timeoutMs}): "not found" is not believed while a request can still be answered`,
        });
      }
    }
    if (config.worker.leaseTtlMs <= config.worker.lockDurationMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['worker', 'leaseTtlMs'],
        message: 'must be above worker.lockDurationMs (a running job must not lose its lease)',
      });
    }
    if (config.http.port !== 0) claim(`tcp:${config.http.port}`, 'http.port', ['http', 'port']);
    const operator = config.http.operator;
    if (operator.port !== 0)
      claim(`tcp:${operator.port}`, 'http.operator.port', ['http', 'operator', 'port']);
    if (operator.tokens.length === 0 && !isLoopbackAddress(operator.listen)) {
      ctx.addIssue({
        code: 'custom',
        path: ['http', 'operator', 'tokens'],
        message: `required when http.operator.listen (${operator.listen}) is not a loopback address`,
      });
    }
    const tokenNames = new Set<string>();
    operator.tokens.forEach((token, i) => {
      if (tokenNames.has(token.name))
        ctx.addIssue({
          code: 'custom',
          path: ['http', 'operator', 'tokens', i, 'name'],
          message: `token ${token.name} is named twice`,
        });
      tokenNames.add(token.name);
    });
    if (config.sip.transports.includes('tcp') && config.sip.tcpPort !== 0) {
      claim(`tcp:${config.sip.tcpPort}`, 'sip.tcpPort', ['sip', 'tcpPort']);
    }
    // ---- SIP over TLS ----
    const tlsListed = config.sip.transports.includes('tls');
    if (tlsListed && config.sip.tls === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['sip', 'tls'],
        message:
          'required when sip.transports lists tls: set sip.tls.certFile and sip.tls.keyFile (PEM files)',
      });
    if (tlsListed && config.sip.tlsPort !== 0)
      claim(`tcp:${config.sip.tlsPort}`, 'sip.tlsPort', ['sip', 'tlsPort']);
    config.tenants.forEach((tenant, i) => {
      if (tenant.tls?.mutual === true && !tlsListed)
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', i, 'tls', 'mutual'],
          message: 'needs sip.transports to list tls: no call could present a client certificate',
        });
    });
    if (
      config.sip.transports.includes('udp') &&
      config.sip.udpPort >= config.rtp.portMin &&
      config.sip.udpPort <= config.rtp.portMax
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['sip', 'udpPort'],
        message: 'must be outside the RTP port range',
      });
    }
  });

export type Config = z.infer<typeof configSchema>;
export type SipConfig = Config['sip'];
export type RtpConfig = Config['rtp'];
export type TenantConfig = z.infer<typeof tenantSchema>;
export type TrunkConfig = z.infer<typeof trunkSchema>;
export type ActionConfig = z.infer<typeof actionSchema>;
export type RetryConfig = z.infer<typeof retrySchema>;
export type WorkerConfig = Config['worker'];
export type PrivacyConfig = Config['privacy'];
export type NotifyConfig = z.infer<typeof notifySchema>;
export type HttpSmsConfig = z.infer<typeof httpSmsSchema>;

/**
 * Out-of-band settings that cannot deliver: refused at load, so a tenant is never promised a
 * message that no channel can carry (test/unit/config/notify-validation.test.ts).
 */
function notifyIssues(
  notify: NotifyConfig,
  sandbox: z.infer<typeof sandboxSchema>,
): { path: (string | number)[]; message: string }[] {
  const issues: { path: (string | number)[]; message: string }[] = [];
  if (notify.retry.backoffMs > notify.retry.maxBackoffMs)
    issues.push({ path: ['retry', 'backoffMs'], message: 'must not be above retry.maxBackoffMs' });
  if (!notify.outOfBand) {
    if (notify.webhookUrl !== undefined)
      issues.push({ path: ['webhookUrl'], message: 'is never used: outOfBand is false' });
    if (typeof notify.sms === 'object')
      issues.push({ path: ['sms'], message: 'is never used: outOfBand is false' });
    return issues;
  }
  if (notify.webhookUrl === undefined && notify.sms === 'none') {
    issues.push({
      path: [],
      message:
        'no out-of-band channel: set webhookUrl or sms, or outOfBand: false to send nothing when a caller can no longer be told',
    });
  }
  if (notify.sms === 'sandbox' && !sandbox.enabled && sandbox.url === undefined) {
    issues.push({
      path: ['sms'],
      message:
        'sends SMS through the sandbox, which does not run here: set sandbox.enabled or sandbox.url, or choose another channel',
    });
  }
  if (typeof notify.sms === 'object')
    issues.push(
      ...smsTemplateIssues(notify.sms).map((message) => ({ path: ['sms', 'body'], message })),
    );
  return issues;
}

function smsTemplateIssues(sms: HttpSmsConfig): string[] {
  const issues: string[] = [];
  const named = [...sms.body.matchAll(/\{([a-z_]+)\}/g)].map((match) => match[1] ?? '');
  const unknown = named.filter(
    (name) => !(SMS_TEMPLATE_FIELDS as readonly string[]).includes(name),
  );
  if (unknown.length > 0)
    issues.push(
      `unknown placeholder ${unknown.map((name) => `{${name}}`).join(', ')} (known: ${SMS_TEMPLATE_FIELDS.map((name) => `{${name}}`).join(' ')})`,
    );
  for (const needed of ['to', 'text'])
    if (!named.includes(needed)) issues.push(`must contain {${needed}}`);
  if (sms.contentType === 'application/json' && unknown.length === 0) {
    try {
      JSON.parse(sms.body.replace(/\{[a-z_]+\}/g, 'x'));
    } catch {
      issues.push('is not JSON once its placeholders are filled (contentType is application/json)');
    }
  }
  return issues;
}

function isCidr(value: string): boolean {
  const [address, bits, ...rest] = value.split('/');
  if (address === undefined || rest.length > 0) return false;
  const v4 = z.ipv4().safeParse(address).success;
  const v6 = !v4 && z.ipv6().safeParse(address).success;
  if (!v4 && !v6) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (v4 ? 32 : 128);
}
