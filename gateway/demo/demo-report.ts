/**
 * The demo's report (pure): the caller's own record (SIP messages, what it said, pressed and heard)
 * joined with callgate's timeline of the call (its events, the audit trail, operation states), the
 * out-of-band messages and the ledger, on one time axis in words; the checks that the story held;
 * and the text the CLI prints.
 */

export interface DemoEntry {
  readonly at: number;
  /** Who reports it: the demo's phone (sip, caller), callgate's call, its relevance gate, the ledger, the SMS sink. */
  readonly source: 'sip' | 'caller' | 'callgate' | 'gate' | 'ledger' | 'message';
  readonly type: string;
  readonly text: string;
  readonly detail: Readonly<Record<string, unknown>>;
}

export interface DemoOperation {
  readonly operation_id: string;
  readonly action: string;
  readonly state: string;
  readonly params?: Readonly<Record<string, unknown>>;
  readonly result?: Readonly<Record<string, unknown>>;
  readonly compensated_by?: string;
  readonly delivery?: {
    readonly decision: string;
    readonly reasons: readonly string[];
    readonly delivered: boolean;
    readonly channel: string;
  };
  /** Each out-of-band channel's state, written when its receiver took the message. */
  readonly out_of_band?: Readonly<Record<string, { readonly state: string }>>;
}

/** The result went out of band and at least one channel's receiver took it. */
export function deliveredOutOfBand(op: DemoOperation): boolean {
  return (
    op.delivery?.channel === 'out_of_band' &&
    Object.values(op.out_of_band ?? {}).some((record) => record.state === 'delivered')
  );
}

export interface DemoMessage {
  readonly channel: string;
  readonly operationId?: string;
  readonly body: Readonly<Record<string, unknown>>;
  readonly at: number;
  readonly deliveries: number;
}

interface TimelineEntry {
  readonly at: number;
  readonly source: string;
  readonly type: string;
  readonly detail: Readonly<Record<string, unknown>>;
}

export interface DemoEntriesInput {
  readonly sip: readonly {
    readonly at: number;
    readonly direction: 'sent' | 'received';
    readonly firstLine: string;
  }[];
  readonly local: readonly DemoEntry[];
  readonly timeline: readonly TimelineEntry[];
  readonly operations: readonly DemoOperation[];
  readonly messages: readonly DemoMessage[];
  readonly heard: readonly { readonly from: number; readonly to: number }[];
}

const TERMINAL = ['COMMITTED', 'FAILED_FINAL', 'CANCELLED'];
/** Shorter stretches of audio are not reported as the agent talking. */
const MIN_HEARD_MS = 200;

/** Short names for operation ids, in the order the call started them: op1, op2, ... */
export function operationAliases(
  operations: readonly DemoOperation[],
  timeline: readonly TimelineEntry[],
): Map<string, string> {
  const firstSeen = (id: string): number =>
    timeline.find((e) => e.detail.operation_id === id || e.detail.operationId === id)?.at ??
    Infinity;
  const ordered = [...operations].sort(
    (a, b) => firstSeen(a.operation_id) - firstSeen(b.operation_id),
  );
  return new Map(ordered.map((op, i) => [op.operation_id, `op${i + 1}`]));
}

function str(value: unknown): string {
  return typeof value === 'string'
    ? value
    : typeof value === 'number' || typeof value === 'boolean'
      ? String(value)
      : JSON.stringify(value ?? null);
}

function argsText(args: unknown): string {
  if (args === null || typeof args !== 'object') return '';
  return Object.entries(args as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${str(v)}`)
    .join(', ');
}

export function buildDemoEntries(input: DemoEntriesInput): DemoEntry[] {
  const entries: DemoEntry[] = [];
  const alias = operationAliases(input.operations, input.timeline);
  const op = (id: unknown): string => alias.get(str(id)) ?? str(id);
  const opsById = new Map(input.operations.map((o) => [o.operation_id, o]));
  const what = (id: unknown): string => {
    const found = opsById.get(str(id));
    const time = found?.params?.time;
    return found === undefined
      ? op(id)
      : `${op(id)} ${found.action}${time !== undefined ? ` ${str(time)}` : ''}`;
  };
  const add = (
    at: number,
    source: DemoEntry['source'],
    type: string,
    text: string,
    detail: Readonly<Record<string, unknown>> = {},
  ): void => {
    entries.push({ at, source, type, text, detail });
  };

  for (const m of input.sip)
    add(
      m.at,
      'sip',
      m.direction === 'sent' ? 'sip_sent' : 'sip_received',
      `${m.direction === 'sent' ? 'caller →' : 'caller ←'} ${m.firstLine}`,
      { firstLine: m.firstLine },
    );
  for (const e of input.local) if (e.type !== 'heard') entries.push(e);
  // A frame or two of noise is not the agent talking.
  for (const span of input.heard.filter((s) => s.to - s.from >= MIN_HEARD_MS))
    add(
      span.from,
      'caller',
      'hearing',
      `caller hears the agent for ${((span.to - span.from) / 1000).toFixed(1)} s`,
      { ms: span.to - span.from },
    );

  for (const e of input.timeline) {
    const d = e.detail;
    const key = `${e.source}:${e.type}`;
    switch (key) {
      case 'call:answered':
        add(
          e.at,
          'callgate',
          e.type,
          `answers: ${str(d.codec)}${d.passthrough === true ? ' passthrough' : ''}, RTP port ${str(d.rtpPort)}`,
          d,
        );
        break;
      case 'call:model_ready':
        add(
          e.at,
          'callgate',
          e.type,
          `model session ${str(d.attempt)} ready, agent ${str(d.agent)}`,
          d,
        );
        break;
      case 'call:caller_speech':
        add(
          e.at,
          'callgate',
          e.type,
          d.state === 'started'
            ? 'hears the caller start speaking'
            : 'hears the caller stop speaking',
          d,
        );
        break;
      case 'call:barge_in':
        add(
          e.at,
          'callgate',
          e.type,
          `BARGE-IN: agent cut off after ${str(d.playedMs)} ms played; playout cleared (${str(d.droppedMs)} ms dropped), item truncated, no operation touched`,
          d,
        );
        break;
      case 'call:response':
        if (d.state === 'done' && d.status !== 'completed')
          add(e.at, 'callgate', e.type, `response ${str(d.status)}`, d);
        break;
      case 'call:agent_said':
        add(e.at, 'callgate', e.type, `agent says: "${str(d.text)}"`, d);
        break;
      case 'call:dtmf':
        add(e.at, 'callgate', e.type, `receives key ${str(d.digit)} (${str(d.source)})`, d);
        break;
      case 'call:tool_call':
        add(
          e.at,
          'callgate',
          e.type,
          `tool ${str(d.name)} → ${str(d.status)}${d.operationId !== undefined ? ` as ${what(d.operationId)}` : ''}`,
          d,
        );
        break;
      case 'call:agent_changed':
        add(
          e.at,
          'callgate',
          e.type,
          `handoff: ${str(d.from)} → ${str(d.to)} (the call keeps its operations)`,
          d,
        );
        break;
      case 'call:result_spoken':
        add(
          e.at,
          'callgate',
          e.type,
          `result of ${what(d.operationId)} spoken (${str(d.status)})`,
          d,
        );
        break;
      case 'call:ended':
        add(
          e.at,
          'callgate',
          e.type,
          `call ended: ${str(d.reason)}; model closed, media released`,
          d,
        );
        break;
      case 'audit:tool_requested':
        add(e.at, 'callgate', e.type, `model asks for ${str(d.tool)}(${argsText(d.args)})`, d);
        break;
      case 'audit:superseded':
        add(
          e.at,
          'gate',
          e.type,
          `${what(d.operationId)} superseded by ${what(d.by)}: ${str(d.action)}${d.detail !== undefined ? ` (${str(d.detail)})` : ''}`,
          d,
        );
        break;
      case 'audit:gate_decision':
        add(
          e.at,
          'gate',
          e.type,
          `GATE ${what(d.operationId)} (${str(d.state)}): ${str(d.decision)}, because ${(Array.isArray(d.reasons) ? d.reasons : []).map(str).join(', ')}`,
          d,
        );
        break;
      case 'audit:delivered':
        add(
          e.at,
          'gate',
          e.type,
          `${what(d.operationId)} delivered ${d.channel === 'voice' ? `by voice${d.commitToAudibleMs !== undefined ? ` (commit to audible ${str(d.commitToAudibleMs)} ms)` : ''}` : 'out of band'}`,
          d,
        );
        break;
      case 'audit:delivery_interrupted':
        add(
          e.at,
          'gate',
          e.type,
          `delivery of ${what(d.operationId)} interrupted; it will be said again`,
          d,
        );
        break;
      default:
        if (e.source === 'operation') {
          add(
            e.at,
            'ledger',
            e.type,
            `${what(d.operation_id)} → ${e.type.replace('operation_', '').toUpperCase()}${d.reason !== undefined && d.reason !== null ? ` (${str(d.reason)})` : ''}`,
            d,
          );
        } else if (e.source === 'call' && !['caller_speech', 'response'].includes(e.type)) {
          add(e.at, 'callgate', e.type, `${e.type.replace(/_/g, ' ')} ${argsText(d)}`, d);
        }
    }
  }
  for (const m of input.messages)
    add(
      m.at,
      'message',
      'out_of_band_message',
      `${m.channel.toUpperCase()} for ${what(m.operationId)}: "${str(m.body.text ?? m.body.message ?? JSON.stringify(m.body))}"`,
      { channel: m.channel, operationId: m.operationId, deliveries: m.deliveries },
    );
  return entries.sort((a, b) => a.at - b.at);
}

/** The story the demo tells, checked in causal order; one sentence per thing that did not hold. */
export function checkDemoStory(input: {
  entries: readonly DemoEntry[];
  operations: readonly DemoOperation[];
  messages: readonly DemoMessage[];
  effects: readonly { operation: string; reference?: string }[];
  sandbox: boolean;
}): string[] {
  const { entries, operations } = input;
  const problems: string[] = [];
  const first = (predicate: (e: DemoEntry) => boolean): number =>
    entries.find(predicate)?.at ?? NaN;
  const answered = first(
    (e) => e.type === 'sip_received' && str(e.detail.firstLine).startsWith('SIP/2.0 200'),
  );
  const bargeIn = first((e) => e.type === 'barge_in');
  const firstTool = first((e) => e.type === 'tool_requested');
  if (!(answered <= bargeIn)) problems.push('the caller did not barge in over the greeting');
  if (!(bargeIn < firstTool)) problems.push('the barge-in did not come before the first tool call');
  const bookings = operations.filter((o) => o.action === 'book_table');
  const early = bookings.find((o) => o.params?.time === '19:30');
  const late = bookings.find((o) => o.params?.time === '20:30');
  if (early === undefined || late === undefined) {
    problems.push(
      `expected a 19:30 and a 20:30 booking, found: ${bookings.map((o) => str(o.params?.time)).join(', ') || 'none'}`,
    );
    return problems;
  }
  const pressed4 = first((e) => e.type === 'pressed' && e.detail.digit === '4');
  const lateRequested = first(
    (e) =>
      e.type === 'tool_requested' &&
      (e.detail.args as Record<string, unknown> | undefined)?.time === '20:30',
  );
  if (!(pressed4 < lateRequested))
    problems.push('the 20:30 booking was not asked for after the caller pressed 4');
  if (!(
    early.state === 'CANCELLED' ||
    (early.state === 'COMMITTED' && early.compensated_by !== undefined)
  ))
    problems.push(`the 19:30 booking ended ${early.state}, neither cancelled nor undone`);
  if (late.state !== 'COMMITTED') problems.push(`the 20:30 booking ended ${late.state}`);
  const hungUp = first((e) => e.type === 'hangup');
  const lateCommitted = first(
    (e) => e.type === 'operation_committed' && e.detail.operation_id === late.operation_id,
  );
  if (!(hungUp < lateCommitted))
    problems.push('the caller did not hang up before the 20:30 booking was confirmed');
  const gate = entries.find(
    (e) => e.type === 'gate_decision' && e.detail.operationId === late.operation_id,
  );
  if (gate?.detail.decision !== 'deliver_out_of_band' || !(lateCommitted <= gate.at))
    problems.push(
      `the gate did not send the 20:30 result out of band after its commit (decision: ${str(gate?.detail.decision)})`,
    );
  if (!deliveredOutOfBand(late))
    problems.push('the 20:30 result is not recorded as delivered out of band');
  if (
    entries.some(
      (e) =>
        e.type === 'result_spoken' &&
        e.detail.operationId === early.operation_id &&
        e.detail.status === 'completed',
    )
  )
    problems.push('the caller was told about the 19:30 booking they had replaced');
  if (input.sandbox) {
    const sent = input.messages.filter((m) => m.operationId === late.operation_id);
    if (sent.length !== 1 || sent[0]?.deliveries !== 1)
      problems.push(`expected one out-of-band message for the 20:30 booking, found ${sent.length}`);
    const booked = input.effects.filter((e) => e.operation === 'book');
    if (booked.length !== 1 || booked[0]?.reference !== late.operation_id)
      problems.push(`the restaurant should hold only the 20:30 booking; it holds ${booked.length}`);
  }
  return problems;
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

/** The report as the CLI prints it. */
export function formatDemoReport(report: {
  ok: boolean;
  problems: readonly string[];
  sessionId: string | undefined;
  durationMs: number;
  entries: readonly DemoEntry[];
  operations: readonly DemoOperation[];
  messages: readonly DemoMessage[];
}): string {
  const lines: string[] = [];
  const origin = report.entries.find((e) => e.source === 'sip')?.at ?? report.entries[0]?.at ?? 0;
  lines.push(
    '',
    `TIMELINE of call ${report.sessionId ?? '(not answered)'}  (seconds from the INVITE)`,
    '',
  );
  for (const e of report.entries)
    lines.push(
      `  ${pad(`+${((e.at - origin) / 1000).toFixed(3)}`, 9)} ${pad(e.source, 9)} ${e.text}`,
    );
  const aliases = operationAliases(
    report.operations,
    report.entries.map((e) => ({ at: e.at, source: e.source, type: e.type, detail: e.detail })),
  );
  const alias = (id: string | undefined): string =>
    id === undefined ? '-' : (aliases.get(id) ?? id);
  lines.push('', 'OUT-OF-BAND MESSAGES', '');
  if (report.messages.length === 0) lines.push('  (none)');
  for (const m of report.messages)
    lines.push(
      `  ${m.channel} for ${alias(m.operationId)} (received ${m.deliveries} time${m.deliveries === 1 ? '' : 's'}): ${str(m.body.text ?? m.body.message ?? JSON.stringify(m.body))}`,
    );
  lines.push('', 'FINAL LEDGER', '');
  lines.push(
    `  ${pad('op', 5)}${pad('operation id', 32)}${pad('action', 20)}${pad('time', 7)}${pad('state', 13)}delivery`,
  );
  for (const op of [...report.operations].sort((a, b) =>
    alias(a.operation_id).localeCompare(alias(b.operation_id)),
  )) {
    const d = op.delivery;
    const channels = Object.entries(op.out_of_band ?? {}).map(
      ([channel, record]) => `${channel} ${record.state}`,
    );
    const pending =
      d?.channel === 'out_of_band' && channels.length > 0
        ? ` (${channels.join(', ')})`
        : d?.delivered
          ? ''
          : ' (pending)';
    const delivery =
      d === undefined
        ? '-'
        : `${d.decision === 'suppress' ? 'suppressed, not told' : `${d.decision} via ${d.channel}${pending}`}; reasons: ${d.reasons.join(', ')}`;
    lines.push(
      `  ${pad(alias(op.operation_id), 5)}${pad(op.operation_id, 32)}${pad(op.action, 20)}${pad(str(op.params?.time ?? ''), 7)}${pad(op.state + (op.compensated_by !== undefined ? '*' : ''), 13)}${delivery}`,
    );
  }
  if (report.operations.some((op) => !TERMINAL.includes(op.state)))
    lines.push('  (some operations are not final yet)');
  lines.push('');
  if (report.ok)
    lines.push(
      `OK: barge-in, booking, change of mind and hang-up went as callgate promises (${(report.durationMs / 1000).toFixed(1)} s).`,
    );
  else lines.push('FAILED:', ...report.problems.map((p) => `  - ${p}`));
  return lines.join('\n');
}
