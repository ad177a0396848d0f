/**
 * Race: two calls share one read (coalesced). It commits, and the first call's model session is
 * lost before the tool output that answers it was heard (the output dropped, or its response cut
 * with the session). A read answered in a tool output is told only once the caller heard the
 * response speaking it: the first call's re-opened session is told the read is pending, and the
 * result is spoken there as any result is; the second call hears it in its own tool output. Each
 * call is told its answer once, and each delivery record says how.
 */
import { describe, expect, it } from 'vitest';
import type { CallSession } from '../../gateway/call/call-session.ts';
import type { DeliveryRecord, Operation } from '../../jobs/ledger/operation.ts';
import { AVAILABILITY } from '../support/action-harness.ts';
import { closeAfterEach } from '../support/cleanup.ts';
import { waitFor } from '../support/processes.ts';
import { testRedis } from '../support/redis.ts';
import { sandboxMessages } from '../support/sandbox-messages.ts';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.ts';
import { placeCall } from './place-call.ts';

const READ_ARGS = { restaurant: 'sushi-kaito', date: '2031-11-05', party_size: 2 };

const SCRIPT = {
  name: 'model-lost-between-read-commit-and-output',
  greeting: 'Hello.',
  fallback: 'Anything else?',
  digits: {
    '1': { say: 'Let me check.', tools: [{ name: 'check_availability', arguments: READ_ARGS }] },
  },
  // Long enough that the first call's answer is still being spoken when its session is cut.
  toolOutputs: {
    check_availability: 'I have looked at that evening for you, and there are free tables.',
  },
  systemMessage: 'Noted.',
};

/** The read stays RUNNING this long: both calls wait on it (below the read's inline deadline, 3 s). */
const LOOKUP_MS = 1_500;

const own = closeAfterEach();

async function callSession(gw: InProcessGateway, not?: CallSession): Promise<CallSession> {
  return waitFor(async () => gw.sessions.find((s) => s !== not), 2_000, 'the call session');
}

async function record(
  gw: InProcessGateway,
  operationId: string,
  sessionId: string,
): Promise<DeliveryRecord | undefined> {
  const ledger = gw.agents.h.layer.ledger;
  return ledger.deliveryFor(await ledger.require('demo', operationId), sessionId);
}

async function recordWhere(
  gw: InProcessGateway,
  operationId: string,
  sessionId: string,
  decision: string,
): Promise<DeliveryRecord> {
  return waitFor(
    async () => {
      const current = await record(gw, operationId, sessionId);
      return current?.decision === decision && current.delivered === true ? current : undefined;
    },
    20_000,
    `the ${decision} record of ${sessionId}`,
  );
}

describe('when the model session is lost between a shared read commit and its tool output', () => {
  it(
    'should tell each call its answer once: the re-opened session speaks it, the other call hears its output',
    { timeout: 90_000 },
    async () => {
      const gw = own(
        await startInProcessGateway({
          script: SCRIPT,
          actions: { check_availability: { ...AVAILABILITY, provider: 'patient_bookings' } },
        }),
      );
      await gw.addFault({
        fault: `latency=${LOOKUP_MS}`,
        service: 'bookings',
        operation: 'availability',
      });
      const first = await placeCall(gw, { holdMs: 14_000, own });
      const firstCall = await callSession(gw);
      const second = await placeCall(gw, { holdMs: 14_000, own });
      const secondCall = await callSession(gw, firstCall);
      const ledger = gw.agents.h.layer.ledger;

      first.rtp.press('1');
      const op = await waitFor(
        async () => (await ledger.listBySession('demo', firstCall.sessionId))[0],
        8_000,
        'the read to be admitted',
      );
      second.rtp.press('1');
      await waitFor(
        async () => (secondCall.agent.answeringInline.has(op.operationId) ? true : undefined),
        8_000,
        'the second call to join the read',
      );
      expect(await ledger.listBySession('demo', secondCall.sessionId)).toEqual([]);

      const committed: Operation = await waitFor(
        async () => {
          const current = await ledger.require('demo', op.operationId);
          return current.state === 'COMMITTED' ? current : undefined;
        },
        8_000,
        'the read to commit',
      );
      // Lost right after the commit: the output is dropped, or the response speaking it is cut.
      const reopened = gw.simulator.nextConnection(10_000);
      first.model.terminate();
      const firstAgain = await reopened;
      await waitFor(
        async () => (firstAgain.session.configuration.instructions ? true : undefined),
        5_000,
        'the re-opened session to be configured',
      );
      // The re-opened session knows the caller has not been told the read.
      expect(String(firstAgain.session.configuration.instructions)).toContain(op.operationId);

      // The first call: spoken once on the re-opened session, as a result.
      const spoken = await recordWhere(gw, op.operationId, firstCall.sessionId, 'spoken');
      expect(spoken).toMatchObject({ channel: 'voice', delivered: true });
      expect(
        firstAgain.session.heard.filter(
          (r) => r.kind === 'system_message' && r.text.includes(op.operationId),
        ),
      ).toHaveLength(1);
      expect(firstAgain.session.said.find((s) => s.responseId === spoken.responseId)?.status).toBe(
        'completed',
      );
      const firstSpoken = gw.events.filter(
        (e) => e.sessionId === firstCall.sessionId && e.event.type === 'result_spoken',
      );
      expect(firstSpoken.map((e) => e.event)).toEqual([
        {
          type: 'result_spoken',
          operationId: op.operationId,
          status: 'completed',
          responseId: spoken.responseId,
        },
      ]);

      // The second call: told in its own tool output, once that output's response played to its end.
      const inline = await recordWhere(
        gw,
        op.operationId,
        secondCall.sessionId,
        'told_in_tool_output',
      );
      expect(inline).toMatchObject({ channel: 'voice', reasons: ['read_answered_inline'] });
      expect(second.model.session.heard.filter((r) => r.kind === 'tool_output')).toHaveLength(1);
      const answer = second.model.session.said.find((s) => s.responseId === inline.responseId);
      expect(answer).toMatchObject({
        text: SCRIPT.toolOutputs.check_availability,
        status: 'completed',
      });
      expect(
        second.model.session.heard.some(
          (r) => r.kind === 'system_message' && r.text.includes(op.operationId),
        ),
      ).toBe(false);
      expect(
        gw.events.filter(
          (e) => e.sessionId === secondCall.sessionId && e.event.type === 'result_spoken',
        ),
      ).toEqual([]);

      // Every result entry acknowledged, nothing said again or sent by message after the calls end.
      const redis = testRedis();
      try {
        await waitFor(
          async () =>
            (await redis.xlen(gw.agents.delivery.streamKey('demo'))) === 0 ? true : undefined,
          5_000,
          'every result entry acknowledged',
        );
      } finally {
        redis.disconnect();
      }
      const results = await Promise.all([first.sipp, second.sipp]);
      first.rtp.mute();
      second.rtp.mute();
      for (const result of results) expect(result.exitCode, result.stderr).toBe(0);
      await waitFor(
        async () =>
          gw.events.filter((e) => e.event.type === 'ended').length === 2 ? true : undefined,
        5_000,
        'both calls to end',
      );
      expect(await record(gw, op.operationId, firstCall.sessionId)).toMatchObject({
        decision: 'spoken',
      });
      expect(await record(gw, op.operationId, secondCall.sessionId)).toMatchObject({
        decision: 'told_in_tool_output',
      });
      expect(await sandboxMessages(gw.sandboxUrl, op.operationId)).toEqual([]);
      expect(committed.state).toBe('COMMITTED');
    },
  );
});
