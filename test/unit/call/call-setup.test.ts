/**
 * The call is answered only once its agent can speak: 180 at once, the media and the model session
 * opened while it rings, then 200 and the greeting. A model that cannot be opened, or not within
 * the setup time, gets the caller a 503 with Retry-After, never an answer followed by a BYE; a
 * CANCEL meanwhile closes the model session and the media. Driven with fakes and a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { Logger } from '../../../config/log.ts';
import { rtpSchema, tenantSchema } from '../../../config/schema.ts';
import type { CallEvent } from '../../../gateway/call/call-events.ts';
import { CallSession } from '../../../gateway/call/call-session.ts';
import type { PlayoutScheduler } from '../../../gateway/media/playout-scheduler.ts';
import type { RtpPortAllocator } from '../../../gateway/media/rtp-port-allocator.ts';
import type { SessionConfig } from '../../../gateway/realtime/realtime-session.ts';
import type { SipHeader } from '../../../gateway/sip/message-types.ts';
import type { InboundCall } from '../../../gateway/sip/signaling-driver.ts';
import { exampleCatalogue } from '../../support/example-agents.ts';
import {
  FakeDelivery,
  FakeDialog,
  FakeModelSession,
  FakeRtp,
  ManualClock,
  negotiated,
  settle,
} from './call-harness.ts';

const SETUP_TIMEOUT_MS = 5_000;

/** What went out on the wire and to the model, in order. */
type Step = string;

/** A model session whose connect the test settles (or never does). */
class SlowModelSession extends FakeModelSession {
  private release: ((error?: Error) => void) | undefined;
  constructor(
    private readonly steps: Step[],
    private readonly onConfigure?: (session: SlowModelSession) => void,
  ) {
    super();
  }
  override connect(): Promise<void> {
    this.steps.push('model connect');
    return new Promise((resolve, reject) => {
      this.release = (error) => (error === undefined ? resolve() : reject(error));
    });
  }
  override async configure(config: SessionConfig): Promise<void> {
    await super.configure(config);
    this.steps.push('model configured');
    this.onConfigure?.(this);
  }
  override async close(): Promise<void> {
    this.steps.push('model closed');
    // A connect still pending fails once the session is closed, as the real client's does.
    this.release?.(new Error('closed'));
    await super.close();
  }
  override createResponse(request?: Parameters<FakeModelSession['createResponse']>[0]) {
    this.steps.push('model speaks');
    return super.createResponse(request);
  }
  connected(): void {
    this.release?.();
  }
  fails(): void {
    this.release?.(new Error('connect ECONNREFUSED'));
  }
}

class RecordingRtp extends FakeRtp {
  constructor(private readonly steps: Step[]) {
    super();
  }
  override async close(): Promise<void> {
    this.steps.push('media closed');
    await super.close();
  }
}

interface Setup {
  readonly call: CallSession;
  readonly clock: ManualClock;
  readonly dialog: FakeDialog;
  readonly rtp: RecordingRtp;
  readonly steps: Step[];
  readonly events: CallEvent[];
  readonly rejections: { status: number; headers: readonly SipHeader[] }[];
  readonly sessions: SlowModelSession[];
  readonly started: Promise<boolean>;
}

function ringing(onConfigure?: (session: SlowModelSession) => void): Setup {
  const clock = new ManualClock();
  const steps: Step[] = [];
  const rtp = new RecordingRtp(steps);
  const dialog = new FakeDialog();
  dialog.state = 'early';
  const sessions: SlowModelSession[] = [];
  const events: CallEvent[] = [];
  const rejections: Setup['rejections'] = [];
  const tenant = tenantSchema.parse({
    id: 'tenant-a',
    numbers: ['+15550100'],
    agent: 'concierge',
    trunk: { allowFrom: ['127.0.0.0/8', '::1/128'] },
  });
  const inbound: InboundCall = {
    callId: dialog.callId,
    caller: { uri: 'sip:+15550111@example.test', user: '+15550111' },
    identity: { caller: '+15550111', verified: false },
    calledNumber: '+15550100',
    tenant,
    agent: 'concierge',
    headers: [],
    offer: undefined,
    source: { address: '127.0.0.2', port: 5060, transport: 'udp' },
    receivedAt: 0,
    dialog,
    accept: () => {
      steps.push('200');
      dialog.state = 'confirmed';
      return { ok: true, media: negotiated('sendrecv') };
    },
    ring: () => steps.push('180'),
    reject: (status, _reason, headers = []) => {
      steps.push(String(status));
      rejections.push({ status, headers });
      dialog.state = 'terminated';
    },
  };
  const call = new CallSession({
    call: inbound,
    media: {
      config: rtpSchema.parse({}),
      ports: {} as RtpPortAllocator,
      scheduler: {} as PlayoutScheduler,
      timer: clock,
      open: async () => {
        steps.push('media open');
        return rtp;
      },
    },
    model: {
      openSession: () => {
        const session = new SlowModelSession(steps, onConfigure);
        sessions.push(session);
        return session;
      },
    },
    catalogue: exampleCatalogue(),
    runtime: {
      handle: async () => ({ status: 'ok' }),
      toolsFor: () => [],
      inlineAnswer: () => undefined,
      settleInlineAnswer: async () => undefined,
    },
    delivery: new FakeDelivery(clock),
    ledger: { get: async () => undefined },
    registry: {
      open: async () => {
        steps.push('call recorded');
      },
      close: async () => {
        steps.push('record closed');
      },
      appendEvent: async () => undefined,
    },
    gatewayId: 'gw-unit',
    log: new Logger({ level: 'error', sink: { write: () => undefined } }),
    clock,
    setupTimeoutMs: SETUP_TIMEOUT_MS,
    retryAfterSeconds: 7,
  });
  call.on((event) => events.push(event));
  const started = call.start();
  return { call, clock, dialog, rtp, steps, events, rejections, sessions, started };
}

function model(setup: Setup): SlowModelSession {
  const session = setup.sessions[0];
  if (session === undefined) throw new Error('no model session was opened');
  return session;
}

const RETRY_AFTER_7 = [{ name: 'Retry-After', value: '7' }];

describe('when a call rings while its model session opens', () => {
  it('should ring first, answer once the model is configured, and only then greet', async () => {
    const setup = ringing();
    await settle();
    expect(setup.steps).toEqual(['180', 'media open', 'model connect']);
    expect(setup.call.phase).toBe('opening_model');
    model(setup).connected();
    expect(await setup.started).toBe(true);
    expect(setup.steps).toEqual([
      '180',
      'media open',
      'model connect',
      'model configured',
      '200',
      'call recorded',
      'model speaks',
    ]);
    expect(setup.call.phase).toBe('live');
    expect(setup.events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['answered', 'model_ready']),
    );
    expect(setup.events.findIndex((e) => e.type === 'answered')).toBeLessThan(
      setup.events.findIndex((e) => e.type === 'model_ready'),
    );
  });

  it('should refuse the call with 503 and Retry-After when the model cannot be opened', async () => {
    const setup = ringing();
    await settle();
    model(setup).fails();
    expect(await setup.started).toBe(false);
    expect(setup.rejections).toEqual([{ status: 503, headers: RETRY_AFTER_7 }]);
    expect(setup.steps).not.toContain('200');
    expect(setup.steps).not.toContain('call recorded');
    expect(setup.rtp.closed).toBe(true);
    expect(setup.events.map((e) => e.type)).not.toContain('answered');
    expect(setup.events.at(-1)).toEqual({
      type: 'rejected',
      status: 503,
      reason: 'Service Unavailable',
    });
    expect(setup.call.phase).toBe('ended');
  });

  it('should refuse the call with 503 once the setup time ran out, closing what it opened', async () => {
    const setup = ringing();
    await setup.clock.advance(SETUP_TIMEOUT_MS - 1);
    expect(setup.rejections).toEqual([]);
    await setup.clock.advance(1);
    expect(await setup.started).toBe(false);
    expect(setup.rejections).toEqual([{ status: 503, headers: RETRY_AFTER_7 }]);
    expect(model(setup).closed).toBe(true);
    expect(setup.rtp.closed).toBe(true);
    expect(setup.steps).not.toContain('200');
    expect(setup.steps).not.toContain('model speaks');
  });

  it('should refuse the call when the model session was lost once configured, before the answer', async () => {
    const setup = ringing((session) =>
      session.emit({ type: 'disconnected', reason: 'network', detail: 'reset' }),
    );
    await settle();
    model(setup).connected();
    expect(await setup.started).toBe(false);
    expect(setup.rejections).toEqual([{ status: 503, headers: RETRY_AFTER_7 }]);
    expect(setup.steps).not.toContain('200');
    expect(model(setup).closed).toBe(true);
    expect(setup.rtp.closed).toBe(true);
  });

  it('should close the model session and the media when the caller cancels meanwhile', async () => {
    const setup = ringing();
    await settle();
    setup.dialog.state = 'terminated';
    setup.dialog.emit({ type: 'cancelled' });
    setup.dialog.emit({ type: 'ended', reason: 'cancelled' });
    await setup.call.done;
    expect(await setup.started).toBe(false);
    expect(model(setup).closed).toBe(true);
    expect(setup.rtp.closed).toBe(true);
    // The 487 is the dialog's own answer to the CANCEL: callgate sends neither 200 nor an error.
    expect(setup.rejections).toEqual([]);
    expect(setup.steps).not.toContain('200');
    // A call that never had a record gets none at its end.
    expect(setup.steps).not.toContain('call recorded');
    expect(setup.steps).not.toContain('record closed');
    expect(setup.events.at(-1)).toEqual({
      type: 'ended',
      reason: 'caller_hung_up',
      dialogReason: 'cancelled',
    });
    // A connect that completes after the CANCEL answers nothing.
    await setup.clock.advance(SETUP_TIMEOUT_MS);
    expect(setup.steps).not.toContain('200');
    expect(setup.rejections).toEqual([]);
  });
});
