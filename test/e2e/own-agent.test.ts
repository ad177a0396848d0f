/**
 * A business's own agent on its own number, from configuration alone: the clinic example
 * (examples/clinic/), whose agent and tool exist only in YAML, against its own HTTP system of
 * record (examples/clinic/clinic-service.ts, not the sandbox) through the generic HTTP provider.
 * A sipp caller presses 1: the simulator calls the tool, the operation is admitted, the service
 * receives it with its Idempotency-Key, operation id and the caller's number, commits, and the
 * result is spoken. Pressing 2 asks again with a reworded reason (not an intent field): the same
 * operation, no second appointment.
 */
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { clinicService } from '../../examples/clinic/clinic-service.ts';
import { REPO_ROOT, waitFor } from '../support/processes.ts';
import { CallerRtp } from './caller-rtp.ts';
import { startCallgate, type CallgateProcess } from './callgate-process.ts';
import { runSipp } from './sipp-runner.ts';

const CLINIC = join(REPO_ROOT, 'examples/clinic');
const CALL_HOLD_MS = 14_000;

let callgate: CallgateProcess | undefined;
let caller: CallerRtp | undefined;
const service = clinicService();
afterEach(async () => {
  caller?.close();
  await callgate?.stop();
  await new Promise((resolve) => service.server.close(resolve));
});

interface ToolAnswer {
  readonly type: string;
  readonly detail: {
    readonly tool?: string;
    readonly status?: string;
    readonly operationId?: string;
  };
}

describe('when a caller dials a clinic whose agent and system of record are its own configuration', () => {
  it(
    'should book once at the clinic with the caller and operation headers, and speak the result',
    { timeout: 90_000 },
    async () => {
      await new Promise<void>((resolve) => service.server.listen(0, '127.0.0.1', resolve));
      const servicePort = (service.server.address() as AddressInfo).port;
      const clinic = parse(readFileSync(join(CLINIC, 'callgate.yaml'), 'utf8')) as {
        providers: { clinic: Record<string, unknown> };
        agents: unknown;
        tenants: unknown;
      };
      const script = parse(readFileSync(join(CLINIC, 'clinic-script.yaml'), 'utf8')) as Record<
        string,
        unknown
      >;
      const cg = (callgate = await startCallgate({
        script,
        overrides: (config) => {
          config.providers = {
            clinic: { ...clinic.providers.clinic, baseUrl: `http://127.0.0.1:${servicePort}` },
          };
          config.agents = clinic.agents;
          config.tenants = clinic.tenants;
          config.sandbox = { enabled: false };
        },
      }));
      const rtp = (caller = await CallerRtp.open());
      const sipp = runSipp({
        scenario: 'uac-call-external-rtp.xml',
        port: cg.sipPort,
        transport: 'udp',
        service: '2000',
        pauseMs: CALL_HOLD_MS,
        timeoutSeconds: 40,
        extraArgs: ['-set', 'rtp_port', String(rtp.port)],
      });
      await waitFor(
        async () => (rtp.audibleSince(0) >= 25 ? true : undefined),
        15_000,
        'the greeting over RTP',
      );
      const call = await cg.activeCall();
      rtp.press('1');
      const op = await cg.delivered(
        call.session_id,
        (o) => o.action === 'book_appointment',
        20_000,
      );
      rtp.press('2');
      await waitFor(
        async () =>
          (await cg.timeline(call.session_id)).filter(
            (e) =>
              e.type === 'tool_answered' && (e as ToolAnswer).detail.tool === 'book_appointment',
          ).length >= 2
            ? true
            : undefined,
        15_000,
        'the second request answered',
      );
      const result = await sipp;
      rtp.mute();
      expect(result.exitCode, result.stderr).toBe(0);

      // One appointment at the clinic, for this operation, with its key and the caller's number.
      expect(service.booked).toHaveLength(1);
      const [booked] = service.booked;
      expect(booked?.operation).toBe('book');
      expect(booked?.args).toEqual({
        patient_name: 'Ada Lovelace',
        date: '2031-03-14',
        time: '09:30',
        reason: 'a check-up',
      });
      expect(booked?.headers['idempotency-key']).toMatch(/^idk_/);
      expect(booked?.headers['x-callgate-operation-id']).toBe(op.operation_id);
      expect(booked?.headers['x-callgate-tenant-id']).toBe('clinic');
      expect(booked?.headers['x-callgate-caller']).toBe('+15550123');
      expect(booked?.headers['x-callgate-called']).toBe('2000');

      // The ledger agrees: one operation of the call, committed, spoken; the repeat was a duplicate of it.
      const operations = await cg.operations(call.session_id);
      expect(operations).toHaveLength(1);
      expect(operations[0]).toMatchObject({
        operation_id: op.operation_id,
        state: 'COMMITTED',
        delivery: { decision: 'spoken', channel: 'voice', delivered: true },
      });
      const answers = (await cg.timeline(call.session_id))
        .filter((e) => e.type === 'tool_answered')
        .map((e) => (e as ToolAnswer).detail);
      expect(answers.map((a) => [a.status, a.operationId])).toEqual([
        ['started', op.operation_id],
        ['duplicate', op.operation_id],
      ]);
    },
  );
});
