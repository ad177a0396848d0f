/**
 * Every error callgate reports, in one table: a stable code, a message template and, where it
 * applies, the SIP or HTTP status it maps to. docs/errors.md documents each row; a test keeps the
 * two in step both ways. Templates use `{name}` placeholders filled from the error's details.
 */

export interface ErrorDefinition {
  readonly message: string;
  readonly sipStatus?: number;
  readonly httpStatus?: number;
}

export const ERRORS = {
  // configuration and startup
  CALLGATE_ERR_CONFIG_UNKNOWN_INTENT_FIELD: {
    message: 'intent field {field} (in {where}) is not an argument of tool {tool}',
  },
  CALLGATE_ERR_REDIS_NOT_INSTALLED: {
    message:
      'redis-server was not found on PATH and REDIS_URL is not set; install it (apt-get install -y redis-server) or set REDIS_URL',
  },
  CALLGATE_ERR_REDIS_START_FAILED: { message: 'the private redis-server did not start: {reason}' },
  CALLGATE_ERR_REDIS_UNREACHABLE: {
    message: 'Redis at {url} is unreachable: {reason}',
    httpStatus: 503,
  },
  CALLGATE_ERR_LISTEN_FAILED: { message: 'cannot listen on {address}: {reason}' },

  // operations (jobs/)
  CALLGATE_ERR_OP_NOT_FOUND: { message: 'operation {operationId} does not exist', httpStatus: 404 },
  CALLGATE_ERR_OP_ILLEGAL_TRANSITION: {
    message: 'operation {operationId} cannot go from {from} to {to}',
    httpStatus: 409,
  },
  CALLGATE_ERR_OP_STALE_ATTEMPT: {
    message: 'operation {operationId}: attempt {attempt} is stale (current attempt {current})',
    httpStatus: 409,
  },
  CALLGATE_ERR_OP_IDEMPOTENCY_CONFLICT: {
    message:
      'idempotency key {idempotencyKey} was already used with different parameters (operation {operationId})',
    httpStatus: 409,
  },
  CALLGATE_ERR_OP_INVALID_ARGUMENTS: {
    message: 'arguments for {action} are invalid: {problems}',
    httpStatus: 400,
  },
  CALLGATE_ERR_OP_UNKNOWN_ACTION: {
    message: 'tenant {tenant} has no action {action}',
    httpStatus: 404,
  },
  CALLGATE_ERR_OP_UNKNOWN_TENANT: { message: 'unknown tenant {tenant}', httpStatus: 404 },
  CALLGATE_ERR_OP_PAYLOAD_TOO_LARGE: {
    message: 'arguments for {action} are {size} bytes, above the limit of {limit}',
    httpStatus: 413,
  },
  CALLGATE_ERR_OP_INVALID_ID: {
    message: 'id {id} is not usable as an operation or job id: {reason}',
    httpStatus: 400,
  },
  CALLGATE_ERR_OP_RECONCILE_REFUSED: {
    message: 'operation {operationId} in state {state} has nothing to reconcile',
    httpStatus: 409,
  },
  CALLGATE_ERR_OOB_REDRIVE_REFUSED: {
    message: 'operation {operationId} has no out-of-band message that gave up ({channels})',
    httpStatus: 409,
  },

  // providers (systems of record)
  CALLGATE_ERR_PROVIDER_TIMEOUT: {
    message: 'provider {provider} did not answer within {timeoutMs} ms',
  },
  CALLGATE_ERR_PROVIDER_CONNECTION: {
    message: 'connection to provider {provider} failed: {reason}',
  },
  CALLGATE_ERR_PROVIDER_REJECTED: { message: 'provider {provider} refused the request: {reason}' },
  CALLGATE_ERR_PROVIDER_UNAVAILABLE: {
    message: 'provider {provider} is unavailable (status {status})',
  },
  CALLGATE_ERR_PROVIDER_BAD_RESPONSE: {
    message: 'provider {provider} answered with something unreadable: {reason}',
  },
  CALLGATE_ERR_PROVIDER_NO_TOKEN: {
    message: 'provider {provider} needs a token in environment variable {env}, which is unset',
  },
  CALLGATE_ERR_PROVIDER_NO_SANDBOX: {
    message:
      'provider {provider} uses the embedded sandbox, which is not running (sandbox.enabled is false and neither a baseUrl nor sandbox.url is set)',
  },

  // SIP signaling (gateway/sip)
  CALLGATE_ERR_SIP_DRACHTIO_CONNECTION: {
    message: 'cannot reach drachtio-server at {address}: {reason}',
  },

  // media (gateway/media)
  CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED: {
    message: 'no free RTP port in {portMin}-{portMax}',
    sipStatus: 503,
  },
  CALLGATE_ERR_MEDIA_CODEC: { message: 'codec {codec} failed: {reason}' },
  CALLGATE_ERR_NATIVE_RTP_UNAVAILABLE: {
    message: 'rtp.sockets is native but the native RTP module cannot be loaded: {reason}',
  },

  // realtime model (gateway/realtime)
  CALLGATE_ERR_MODEL_CONNECT: {
    message: 'cannot connect to the realtime model at {url}: {reason}',
  },
  CALLGATE_ERR_MODEL_TIMEOUT: {
    message: 'the realtime model did not answer {what} within {timeoutMs} ms',
  },
  CALLGATE_ERR_MODEL_PROTOCOL: {
    message: 'the realtime model sent something unexpected: {reason}',
  },
  CALLGATE_ERR_MODEL_DISCONNECTED: { message: 'the realtime model session closed: {reason}' },
  CALLGATE_ERR_MODEL_FRAME_TOO_LARGE: {
    message: 'a realtime frame of {size} bytes is above the limit of {limit}',
  },
  CALLGATE_ERR_MODEL_REJECTED: {
    message: 'the realtime model refused {what}: {providerCode}: {reason}',
  },
  CALLGATE_ERR_MODEL_BAD_TOOL_ARGUMENTS: {
    message: 'function call {callId} ({name}) has arguments that are not JSON: {reason}',
  },
  CALLGATE_ERR_MODEL_SESSION_LIMIT: {
    message: 'the realtime model session reached its maximum duration: {reason}',
  },
  CALLGATE_ERR_MODEL_NOT_CONNECTED: {
    message: 'the realtime model session is not connected; {what} was dropped',
  },
  CALLGATE_ERR_MODEL_BUSY: {
    message: 'too many responses are waiting for the realtime model ({limit}); {what} was dropped',
  },
  CALLGATE_ERR_SIMULATOR_SCRIPT: {
    message: 'the simulator script {source} is invalid: {problems}',
  },
  CALLGATE_ERR_SIMULATOR_SPEECH: { message: 'the simulator could not synthesize speech: {reason}' },

  // HTTP: probes, metrics and the operator API
  CALLGATE_ERR_HTTP_NOT_FOUND: { message: 'no route for {method} {path}', httpStatus: 404 },
  CALLGATE_ERR_HTTP_BAD_REQUEST: { message: 'bad request: {reason}', httpStatus: 400 },
  CALLGATE_ERR_HTTP_UNAUTHORIZED: {
    message: 'a valid bearer token is required: {reason}',
    httpStatus: 401,
  },
  CALLGATE_ERR_HTTP_FORBIDDEN: {
    message: 'token {token} lacks the scope {scope} that {method} {path} needs',
    httpStatus: 403,
  },
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof ERRORS;

export type ErrorDetails = Readonly<Record<string, string | number | boolean | undefined>>;

/** An error with a code from the table. Subclasses exist where control flow depends on the kind. */
export class CallgateError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  constructor(code: ErrorCode, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(formatMessage(code, details), options);
    this.name = 'CallgateError';
    this.code = code;
    this.details = details;
  }
  get sipStatus(): number | undefined {
    return sipStatusOf(this.code);
  }
  get httpStatus(): number | undefined {
    return httpStatusOf(this.code);
  }
}

export function formatMessage(code: ErrorCode, details: ErrorDetails = {}): string {
  return ERRORS[code].message.replace(/\{(\w+)\}/g, (whole, name: string) => {
    const value = details[name];
    return value === undefined ? whole : String(value);
  });
}

export function sipStatusOf(code: ErrorCode): number | undefined {
  const row: ErrorDefinition = ERRORS[code];
  return row.sipStatus;
}

export function httpStatusOf(code: ErrorCode): number | undefined {
  const row: ErrorDefinition = ERRORS[code];
  return row.httpStatus;
}

export function isCallgateError(error: unknown, code?: ErrorCode): error is CallgateError {
  return error instanceof CallgateError && (code === undefined || error.code === code);
}
