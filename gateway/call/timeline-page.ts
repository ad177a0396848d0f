/**
 * The operator's HTML page for one call (pure: timeline in, HTML out; no build step, no script):
 * the call's record, its operations with their final state and gate decision, and every event on
 * one time axis, each placed by its offset from the start of the call and coloured by its source.
 */
import type { TimelineEntry } from './calls-api.ts';

export interface TimelinePageInput {
  readonly call: Readonly<Record<string, unknown>>;
  readonly operations: readonly Readonly<Record<string, unknown>>[];
  readonly timeline: readonly TimelineEntry[];
}

const SOURCE_COLOURS: Readonly<Record<TimelineEntry['source'], string>> = {
  call: '#2f6fb0',
  audit: '#8a5a00',
  operation: '#2e7d32',
};

export function escapeHtml(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

function detailText(detail: Readonly<Record<string, unknown>>): string {
  return Object.entries(detail)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

export function renderTimelinePage(input: TimelinePageInput): string {
  const { call, operations, timeline } = input;
  const start = typeof call.started_at === 'number' ? call.started_at : (timeline[0]?.at ?? 0);
  const end = Math.max(
    start + 1,
    ...timeline.map((e) => e.at),
    typeof call.ended_at === 'number' ? call.ended_at : 0,
  );
  const span = end - start;
  const rows = timeline
    .map((e) => {
      const offset = e.at - start;
      const left = Math.min(100, Math.max(0, (offset / span) * 100)).toFixed(2);
      return `<tr><td class="t">+${(offset / 1000).toFixed(3)} s</td><td class="axis"><span class="dot" style="left:${left}%;background:${SOURCE_COLOURS[e.source]}"></span></td><td class="src" style="color:${SOURCE_COLOURS[e.source]}">${escapeHtml(e.source)}</td><td>${escapeHtml(e.type)}</td><td class="d">${escapeHtml(detailText(e.detail))}</td></tr>`;
    })
    .join('\n');
  const ops = operations
    .map((op) => {
      const delivery = (op.delivery ?? {}) as Record<string, unknown>;
      return `<tr><td>${escapeHtml(op.operation_id)}</td><td>${escapeHtml(op.action)}</td><td>${escapeHtml(op.state)}</td><td>${escapeHtml(delivery.decision ?? '')}</td><td>${escapeHtml(Array.isArray(delivery.reasons) ? delivery.reasons.join(', ') : '')}</td><td>${escapeHtml(delivery.channel ?? '')}</td></tr>`;
    })
    .join('\n');
  const fields = [
    'session_id',
    'tenant_id',
    'caller',
    'called_number',
    'agent',
    'owner_gateway',
    'state',
    'end_reason',
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>callgate call ${escapeHtml(call.session_id)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:2rem}
td,th{padding:.25rem .5rem;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.t{white-space:nowrap;font-variant-numeric:tabular-nums}
td.axis{position:relative;width:30%;min-width:12rem}
span.dot{position:absolute;top:.55rem;width:.6rem;height:.6rem;border-radius:50%;margin-left:-.3rem}
td.src{font-weight:600}
td.d{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
</style></head><body>
<h1>Call ${escapeHtml(call.session_id)}</h1>
<table>${fields.map((f) => `<tr><th>${f}</th><td>${escapeHtml(call[f] ?? '')}</td></tr>`).join('')}</table>
<h2>Operations</h2>
<table><tr><th>operation</th><th>action</th><th>state</th><th>gate decision</th><th>reasons</th><th>channel</th></tr>
${ops}
</table>
<h2>Timeline (${(span / 1000).toFixed(1)} s)</h2>
<table><tr><th>time</th><th>axis</th><th>source</th><th>event</th><th>detail</th></tr>
${rows}
</table>
</body></html>
`;
}
