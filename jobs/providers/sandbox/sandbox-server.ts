/**
 * The bundled sandbox systems of record: restaurant bookings and payments behind one node:http
 * server, with fault injection and reporting endpoints so tests count real side effects.
 * The HTTP API is described in ./README.md.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rootLogger, type Logger } from '../../../config/log.ts';
import { BookingsService } from './bookings-service.ts';
import { MessageSink } from './message-sink.ts';
import { EffectJournal } from './effect-journal.ts';
import { FaultRuleBook, type FaultRule } from './fault-rule-book.ts';
import {
  DEFAULT_HOLD_MS,
  FaultSpecError,
  mergeFaultSpecs,
  parseFaultSpec,
  type FaultSpec,
} from './fault-spec.ts';
import { IdempotencyStore } from './idempotency-store.ts';
import { PaymentsService } from './payments-service.ts';
import { ReferenceBook, type InFlightRequest } from './reference-book.ts';
import type { SandboxService, ServiceAnswer, ServiceContext } from './sandbox-service.ts';

/** Request bodies above this are refused with 413: operations take small JSON documents. */
export const SANDBOX_MAX_BODY_BYTES = 65_536;
/** Past this much refused body the socket is cut instead of drained, so a flood cannot tie it up. */
const MAX_DRAIN_BYTES = 8 * 1_048_576;

export const FAULT_HEADER = 'x-sandbox-fault';
export const TENANT_HEADER = 'x-callgate-tenant-id';
export const OPERATION_HEADER = 'x-callgate-operation-id';
export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const ATTEMPT_TOKEN_HEADER = 'x-callgate-attempt-token';
/** The tenant of requests that name none. */
const DEFAULT_TENANT = 'default';

export interface SandboxOptions {
  /** 127.0.0.1 unless set. */
  readonly host?: string;
  /** 0 (any free port) unless set. */
  readonly port?: number;
  readonly log?: Logger;
}

export interface RunningSandbox {
  /** Base URL, e.g. http://127.0.0.1:40123; services live under /bookings and /payments. */
  readonly url: string;
  close(): Promise<void>;
}

type WaitEnd = 'elapsed' | 'woken' | 'closing';

interface RequestContext extends ServiceContext {
  readonly spec: FaultSpec;
  /** The attempt's fence token (X-Callgate-Attempt-Token), when the request carries one. */
  readonly attemptToken?: string;
}

export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const sandbox = new SandboxServer(options.log ?? rootLogger().child({ component: 'sandbox' }));
  const url = await sandbox.listen(options.host ?? '127.0.0.1', options.port ?? 0);
  return { url, close: () => sandbox.close() };
}

export class SandboxServer {
  private readonly server: Server;
  private readonly services = new Map<string, SandboxService>();
  private readonly journal = new EffectJournal();
  private readonly rules = new FaultRuleBook();
  private readonly sink = new MessageSink();
  private readonly keys = new IdempotencyStore();
  private readonly references = new ReferenceBook();
  /** Cancelled references that never arrived: a late request with one is refused. */
  private tombstones = new Set<string>();
  private readonly waiters = new Set<(end: WaitEnd) => void>();
  private closing = false;

  constructor(private readonly log: Logger) {
    for (const service of [new BookingsService(), new PaymentsService()])
      this.services.set(service.name, service);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        this.log.error('sandbox handler failed', { error, path: req.url });
        if (!res.headersSent)
          sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
        else res.destroy();
      });
    });
  }

  listen(host: string, port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        const address = this.server.address() as AddressInfo;
        const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        resolve(`http://${shownHost}:${address.port}`);
      });
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const end of [...this.waiters]) end('closing');
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const parts = url.pathname
      .split('/')
      .filter((p) => p !== '')
      .map((p) => safeDecode(p));
    const method = req.method ?? 'GET';
    const read = await readBody(req);
    if (read.kind === 'too_large') {
      sendJson(res, 413, {
        error: {
          code: 'payload_too_large',
          message: `bodies are limited to ${SANDBOX_MAX_BODY_BYTES} bytes`,
        },
      });
      return;
    }
    if (read.kind === 'aborted') return;
    const body = parseObject(read.text);
    if (body === 'malformed') {
      sendJson(res, 400, {
        error: { code: 'malformed_json', message: 'the body is not valid JSON' },
      });
      return;
    }
    if (body === 'not_object') {
      sendJson(res, 400, {
        error: { code: 'invalid_request', message: 'the body must be a JSON object' },
      });
      return;
    }

    const [first, second, third, fourth, ...rest] = parts;
    if (first === 'healthz' && second === undefined) return sendJson(res, 200, { ok: true });
    if (
      (first === 'messages' || first === 'webhooks') &&
      second === undefined &&
      method === 'POST'
    ) {
      const header = (name: string) =>
        typeof req.headers[name] === 'string' ? req.headers[name] : undefined;
      const { message, duplicate } = this.sink.receive(
        first === 'messages' ? 'sms' : 'webhook',
        body,
        {
          idempotencyKey: header(IDEMPOTENCY_HEADER),
          signature: header('x-callgate-signature'),
          raw: read.text,
        },
      );
      return sendJson(res, duplicate ? 200 : 201, { seq: message.seq, duplicate });
    }
    if (first === 'admin') return this.admin(method, second, url.searchParams, body, res);
    const service = first === undefined ? undefined : this.services.get(first);
    if (service === undefined || second === undefined || rest.length > 0)
      return notFound(res, url.pathname);

    let headerSpec: FaultSpec;
    try {
      headerSpec = parseFaultSpec(headerValue(req, FAULT_HEADER) ?? '');
    } catch (error) {
      if (error instanceof FaultSpecError)
        return sendJson(res, 400, { error: { code: 'invalid_fault', message: error.message } });
      throw error;
    }
    const tenant = headerValue(req, TENANT_HEADER) ?? DEFAULT_TENANT;
    const bodyReference =
      typeof body.reference === 'string' && body.reference !== '' ? body.reference : undefined;
    const reference = headerValue(req, OPERATION_HEADER) ?? bodyReference;
    const idempotencyKey = headerValue(req, IDEMPOTENCY_HEADER);
    const attemptToken = headerValue(req, ATTEMPT_TOKEN_HEADER);
    const context = (operation: string): RequestContext => ({
      tenant,
      reference,
      idempotencyKey,
      attemptToken,
      spec: mergeFaultSpecs(
        this.rules.match({ service: service.name, operation, tenant }),
        headerSpec,
      ),
    });

    if (second === 'operations') {
      if (third === undefined && fourth === undefined && method === 'GET') {
        const key = url.searchParams.get('idempotency_key');
        if (key === null)
          return sendJson(res, 400, {
            error: { code: 'invalid_request', message: 'idempotency_key is required' },
          });
        return this.lookupByKey(service, key, context('lookup'), res);
      }
      if (third !== undefined && fourth === undefined && method === 'GET')
        return this.lookup(service, third, context('lookup'), res);
      if (third !== undefined && fourth === 'cancel' && method === 'POST')
        return this.cancel(service, third, context('cancel'), res);
      if (third !== undefined && fourth === 'void' && method === 'POST')
        return this.voidAttempts(service, third, body, context('void'), res);
      return notFound(res, url.pathname);
    }
    if (third !== undefined || !service.operations().includes(second))
      return notFound(res, url.pathname);
    if (method !== 'POST')
      return sendJson(res, 405, {
        error: { code: 'method_not_allowed', message: 'operations take POST' },
      });
    return this.execute(service, second, body, context(second), res);
  }

  private async execute(
    service: SandboxService,
    operation: string,
    body: Readonly<Record<string, unknown>>,
    context: RequestContext,
    res: ServerResponse,
  ): Promise<void> {
    const { tenant, reference, idempotencyKey, spec, attemptToken } = context;
    const mutation = service.isMutation(operation);
    this.journal.requestReceived(reference);
    if (
      mutation &&
      reference !== undefined &&
      this.tombstones.has(tombstone(service.name, reference))
    ) {
      return this.deliver(res, cancelledAnswer(), spec);
    }
    if (
      mutation &&
      reference !== undefined &&
      this.references.isVoided(service.name, reference, attemptToken)
    ) {
      // An attempt voided by reconciliation arrived late (held by a proxy, sent by a paused worker).
      return sendJson(res, 410, {
        error: {
          code: 'attempt_voided',
          message: `attempt ${attemptToken ?? ''} of ${reference} was voided; it takes no effect`,
        },
      });
    }
    const keyed =
      mutation && service.honoursIdempotencyKeys && idempotencyKey !== undefined
        ? idempotencyKey
        : undefined;
    if (keyed !== undefined) {
      const check = this.keys.claim(tenant, keyed, body, reference);
      if (check.kind === 'conflict') {
        return sendJson(res, 422, {
          error: {
            code: 'idempotency_key_reused',
            message: `idempotency key ${keyed} was used with a different request`,
          },
        });
      }
      if (check.kind === 'in_progress') {
        return sendJson(res, 409, {
          error: {
            code: 'request_in_progress',
            message: `a request with key ${keyed} is in progress`,
          },
        });
      }
      if (check.kind === 'replay') {
        if ((await this.wait(spec.latencyMs ?? 0)) === 'closing') return void res.destroy();
        if (spec.errorStatus !== undefined)
          return sendJson(res, spec.errorStatus, injectedError(spec.errorStatus));
        if (spec.dropBeforeCommit === true) return void res.destroy();
        res.setHeader('Idempotent-Replayed', 'true');
        return this.deliver(res, { status: check.answer.status, body: check.answer.body }, spec);
      }
    }

    const end = this.journal.begin(tenant, operation, { reference, attemptToken });
    let wake: () => void = () => undefined;
    const inFlight: InFlightRequest = {
      attemptToken,
      cancelMode: spec.cancel ?? 'on',
      lookupProcessing: spec.lookup === 'processing',
      cancelRequested: false,
      wake: () => wake(),
    };
    const leave =
      reference !== undefined && mutation
        ? this.references.enter(service.name, reference, inFlight)
        : () => undefined;
    let answer: ServiceAnswer | undefined;
    try {
      const waited = await this.wait(spec.latencyMs ?? 0, (w) => (wake = w));
      if (waited === 'closing') return void res.destroy();
      if (inFlight.cancelRequested) {
        answer = cancelledAnswer();
        if (reference !== undefined)
          this.references.decide(service.name, reference, { state: 'cancelled' });
      } else if (spec.errorStatus !== undefined || spec.dropBeforeCommit === true) {
        if (keyed !== undefined) this.keys.release(tenant, keyed);
        if (spec.dropBeforeCommit === true) return void res.destroy();
        return sendJson(res, spec.errorStatus ?? 503, injectedError(spec.errorStatus ?? 503));
      } else {
        answer = service.apply(operation, body, context);
        if (answer.effect !== undefined) {
          this.journal.commit({
            service: service.name,
            operation,
            tenant,
            reference,
            idempotencyKey,
            providerRef: answer.effect.providerRef,
            result: answer.effect.result,
          });
        }
        if (mutation && reference !== undefined)
          this.recordOutcome(service.name, reference, answer);
        if (mutation && reference !== undefined && spec.lookup === 'processing')
          this.references.markStuck(service.name, reference);
      }
      if (keyed !== undefined)
        this.keys.settle(tenant, keyed, { status: answer.status, body: answer.body });
    } finally {
      end();
      leave();
    }
    return this.deliver(res, answer, spec);
  }

  private recordOutcome(service: string, reference: string, answer: ServiceAnswer): void {
    if (answer.effect !== undefined) {
      this.references.decide(service, reference, {
        state: 'committed',
        result: answer.effect.result,
        providerRef: answer.effect.providerRef,
        count: 1,
      });
      return;
    }
    const error = answer.body.error as { code?: unknown; message?: unknown } | undefined;
    if (answer.status >= 400 && error !== undefined) {
      this.references.decide(service, reference, {
        state: 'failed',
        code: String(error.code),
        message: String(error.message),
      });
    } else if (answer.status < 300) {
      // A mutation that succeeded without a new effect (cancelling a cancelled booking).
      const result = (answer.body.result ?? {}) as Record<string, unknown>;
      const providerRef =
        typeof answer.body.provider_ref === 'string' ? answer.body.provider_ref : reference;
      this.references.decide(service, reference, {
        state: 'committed',
        result,
        providerRef,
        count: 0,
      });
    }
  }

  private async lookup(
    service: SandboxService,
    reference: string,
    context: RequestContext,
    res: ServerResponse,
  ): Promise<void> {
    const { spec } = context;
    if ((await this.wait(spec.latencyMs ?? 0)) === 'closing') return void res.destroy();
    if (spec.errorStatus !== undefined)
      return sendJson(res, spec.errorStatus, injectedError(spec.errorStatus));
    if (spec.dropBeforeCommit === true) return void res.destroy();
    const pending = this.references.pending(service.name, reference);
    if (
      spec.lookup === 'processing' ||
      pending.length > 0 ||
      this.references.isStuck(service.name, reference)
    ) {
      return this.deliver(res, { status: 200, body: { status: 'processing', reference } }, spec);
    }
    const outcome = this.references.outcome(service.name, reference);
    if (outcome === undefined)
      return this.deliver(res, { status: 404, body: { status: 'not_found', reference } }, spec);
    switch (outcome.state) {
      case 'committed':
        return this.deliver(
          res,
          {
            status: 200,
            body: {
              status: 'committed',
              reference,
              result: outcome.result,
              provider_ref: outcome.providerRef,
              count: outcome.count,
            },
          },
          spec,
        );
      case 'failed':
        return this.deliver(
          res,
          {
            status: 200,
            body: {
              status: 'failed',
              reference,
              error: { code: outcome.code, message: outcome.message },
            },
          },
          spec,
        );
      case 'cancelled':
        return this.deliver(res, { status: 200, body: { status: 'cancelled', reference } }, spec);
    }
  }

  private async lookupByKey(
    service: SandboxService,
    key: string,
    context: RequestContext,
    res: ServerResponse,
  ): Promise<void> {
    if (!service.honoursIdempotencyKeys) {
      return sendJson(res, 404, {
        error: { code: 'not_supported', message: `${service.name} does not keep idempotency keys` },
      });
    }
    const record = this.keys.find(context.tenant, key);
    if (record === undefined)
      return sendJson(res, 404, { status: 'not_found', idempotency_key: key });
    if (record.answer === undefined)
      return sendJson(res, 200, { status: 'processing', idempotency_key: key });
    if (record.reference !== undefined) return this.lookup(service, record.reference, context, res);
    const { status, body } = record.answer;
    if (status < 300)
      return sendJson(res, 200, {
        status: 'committed',
        idempotency_key: key,
        result: body.result,
        provider_ref: body.provider_ref,
      });
    return sendJson(res, 200, { status: 'failed', idempotency_key: key, error: body.error });
  }

  /**
   * Voids attempts of `reference` by their tokens, unless one took effect (then: committed) or is
   * being processed now (then: processing, ask again). A voided token's request is refused later.
   */
  private async voidAttempts(
    service: SandboxService,
    reference: string,
    body: Readonly<Record<string, unknown>>,
    context: RequestContext,
    res: ServerResponse,
  ): Promise<void> {
    const { spec } = context;
    if ((await this.wait(spec.latencyMs ?? 0)) === 'closing') return void res.destroy();
    if (spec.errorStatus !== undefined)
      return sendJson(res, spec.errorStatus, injectedError(spec.errorStatus));
    const tokens = body.attempt_tokens;
    if (
      !Array.isArray(tokens) ||
      !tokens.every((t): t is string => typeof t === 'string' && t !== '')
    ) {
      return sendJson(res, 400, {
        error: {
          code: 'invalid_request',
          message: 'attempt_tokens must be an array of non-empty strings',
        },
      });
    }
    const outcome = this.references.outcome(service.name, reference);
    if (outcome?.state === 'committed') {
      return sendJson(res, 200, {
        status: 'committed',
        reference,
        result: outcome.result,
        provider_ref: outcome.providerRef,
      });
    }
    if (
      this.references
        .pending(service.name, reference)
        .some((p) => p.attemptToken !== undefined && tokens.includes(p.attemptToken))
    ) {
      return sendJson(res, 200, { status: 'processing', reference });
    }
    this.references.voidTokens(service.name, reference, tokens);
    return sendJson(res, 200, { status: 'voided', reference, attempt_tokens: tokens });
  }

  private async cancel(
    service: SandboxService,
    reference: string,
    context: RequestContext,
    res: ServerResponse,
  ): Promise<void> {
    const { spec } = context;
    if ((await this.wait(spec.latencyMs ?? 0)) === 'closing') return void res.destroy();
    if (spec.errorStatus !== undefined)
      return sendJson(res, spec.errorStatus, injectedError(spec.errorStatus));
    const notSupported = () => sendJson(res, 501, { status: 'not_supported', reference });
    if (spec.cancel === 'off') return notSupported();
    const pending = this.references.pending(service.name, reference);
    if (pending.length > 0) {
      if (pending.some((p) => p.cancelMode === 'off')) return notSupported();
      for (const request of pending) request.cancelRequested = true;
      if (spec.cancel === 'deferred' || pending.some((p) => p.cancelMode === 'deferred')) {
        return sendJson(res, 202, { status: 'pending', reference });
      }
      for (const request of pending) request.wake();
      return sendJson(res, 200, { status: 'cancelled', reference });
    }
    const outcome = this.references.outcome(service.name, reference);
    if (outcome?.state === 'committed') {
      return sendJson(res, 200, {
        status: 'already_committed',
        reference,
        result: outcome.result,
        provider_ref: outcome.providerRef,
      });
    }
    // Nothing committed and nothing in flight: refuse the reference from now on, so a request
    // still on its way cannot take effect after we said "cancelled".
    this.tombstones.add(tombstone(service.name, reference));
    return sendJson(res, 200, { status: 'cancelled', reference });
  }

  private admin(
    method: string,
    what: string | undefined,
    query: URLSearchParams,
    body: Readonly<Record<string, unknown>>,
    res: ServerResponse,
  ): void {
    const key = `${method} ${what ?? ''}`;
    switch (key) {
      case 'POST faults': {
        const problems = ruleProblems(body);
        if (problems.length > 0)
          return sendJson(res, 400, {
            error: { code: 'invalid_request', message: problems.join('; ') },
          });
        try {
          const rule = this.rules.add({
            fault: body.fault as string,
            ...(typeof body.service === 'string' ? { service: body.service } : {}),
            ...(typeof body.operation === 'string' ? { operation: body.operation } : {}),
            ...(typeof body.tenant === 'string' ? { tenant: body.tenant } : {}),
            ...(typeof body.nth === 'number' ? { nth: body.nth } : {}),
            ...(typeof body.times === 'number' ? { times: body.times } : {}),
          });
          return sendJson(res, 201, describeRule(rule));
        } catch (error) {
          if (error instanceof FaultSpecError)
            return sendJson(res, 400, { error: { code: 'invalid_fault', message: error.message } });
          throw error;
        }
      }
      case 'GET faults':
        return sendJson(res, 200, { rules: this.rules.list().map(describeRule) });
      case 'DELETE faults': {
        const cleared = this.rules.list().length;
        this.rules.clear();
        return sendJson(res, 200, { cleared });
      }
      case 'GET effects': {
        const filter: Record<string, string> = {};
        for (const name of ['service', 'tenant', 'reference', 'operation']) {
          const value = query.get(name);
          if (value !== null) filter[name] = value;
        }
        return sendJson(res, 200, { effects: this.journal.list(filter) });
      }
      case 'GET counts':
        return sendJson(res, 200, this.journal.counts());
      case 'GET concurrency':
        return sendJson(res, 200, this.journal.concurrencyReport());
      case 'GET messages':
        return sendJson(res, 200, {
          messages: this.sink.list({
            operationId: query.get('operation_id') ?? undefined,
            channel: query.get('channel') ?? undefined,
          }),
        });
      case 'POST reset':
        for (const service of this.services.values()) service.reset();
        this.journal.reset();
        this.sink.reset();
        this.rules.clear();
        this.keys.reset();
        this.references.reset();
        this.tombstones = new Set();
        return sendJson(res, 200, { reset: true });
      default:
        return notFound(res, `/admin/${what ?? ''}`);
    }
  }

  /** Sends an answer, or loses it the way the request's fault spec says. */
  private deliver(res: ServerResponse, answer: ServiceAnswer, spec: FaultSpec): void {
    switch (spec.afterCommit) {
      case 'drop':
        res.destroy();
        return;
      case 'garbage':
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end('{"result": <<not json');
        return;
      case 'timeout': {
        let release: (end: WaitEnd) => void = () => undefined;
        res.once('close', () => release('woken'));
        void this.wait(spec.holdMs ?? DEFAULT_HOLD_MS, (wake) => (release = () => wake())).then(
          (end) => {
            if (end === 'elapsed' && !res.destroyed) sendJson(res, answer.status, answer.body);
            else res.destroy();
          },
        );
        return;
      }
      default:
        sendJson(res, answer.status, answer.body);
    }
  }

  /**
   * Waits `ms` unless woken (a confirmed cancel) or the server closes. `onWake` receives the
   * function that ends the wait early.
   */
  private wait(ms: number, onWake?: (wake: () => void) => void): Promise<WaitEnd> {
    if (this.closing) return Promise.resolve('closing');
    // No latency: nothing can arrive in between (one thread), so there is nothing to wake early.
    // A zero timer would hold every answer for a timer turn (about 1 ms) and cost a wake-up.
    if (ms <= 0) return Promise.resolve('elapsed');
    return new Promise((resolve) => {
      const finish = (end: WaitEnd) => {
        clearTimeout(timer);
        this.waiters.delete(finish);
        resolve(end);
      };
      const timer = setTimeout(() => finish('elapsed'), ms);
      this.waiters.add(finish);
      onWake?.(() => finish('woken'));
    });
  }
}

function cancelledAnswer(): ServiceAnswer {
  return {
    status: 422,
    body: {
      error: { code: 'cancelled', message: 'the request was cancelled before it took effect' },
    },
  };
}

function injectedError(status: number): Record<string, unknown> {
  return { error: { code: 'injected_fault', message: `injected ${status} before commit` } };
}

function tombstone(service: string, reference: string): string {
  return `${service}\u0000${reference}`;
}

function ruleProblems(body: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  if (typeof body.fault !== 'string' || body.fault === '')
    problems.push('fault must be a non-empty string');
  for (const name of ['service', 'operation', 'tenant']) {
    if (body[name] !== undefined && typeof body[name] !== 'string')
      problems.push(`${name} must be a string`);
  }
  for (const name of ['nth', 'times']) {
    const value = body[name];
    if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < 1))
      problems.push(`${name} must be a positive integer`);
  }
  return problems;
}

function describeRule(rule: FaultRule): Record<string, unknown> {
  const { spec: _spec, ...shown } = rule;
  return shown;
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === '' ? undefined : first;
}

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

function notFound(res: ServerResponse, path: string): void {
  sendJson(res, 404, { error: { code: 'not_found', message: `no route for ${path}` } });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

type BodyRead =
  | { readonly kind: 'ok'; readonly text: string }
  | { readonly kind: 'too_large' }
  | { readonly kind: 'aborted' };

function readBody(req: IncomingMessage): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_DRAIN_BYTES) {
        req.destroy();
        return;
      }
      // Past the limit the rest is drained, not kept, so the client reads our 413.
      if (size <= SANDBOX_MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () =>
      resolve(
        size > SANDBOX_MAX_BODY_BYTES
          ? { kind: 'too_large' }
          : { kind: 'ok', text: Buffer.concat(chunks).toString('utf8') },
      ),
    );
    req.on('error', () => resolve({ kind: 'aborted' }));
    req.on('close', () => {
      if (!req.complete) resolve({ kind: 'aborted' });
    });
  });
}

function parseObject(text: string): Readonly<Record<string, unknown>> | 'malformed' | 'not_object' {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'malformed';
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not_object';
  return value as Record<string, unknown>;
}
