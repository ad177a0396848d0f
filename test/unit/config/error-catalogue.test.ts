import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CallgateError, ERRORS, formatMessage, type ErrorCode } from '../../../config/errors.ts';

const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
/** Rows of the catalogue: | `CODE` | message | SIP | HTTP | */
const documented = new Map(
  [...doc.matchAll(/^\|\s*`(CALLGATE_ERR_[A-Z0-9_]+)`\s*\|(.*)\|(.*)\|(.*)\|\s*$/gm)].map((m) => [
    m[1] as string,
    { message: (m[2] ?? '').trim().replace(/\\\|/g, '|'), sip: (m[3] ?? '').trim(), http: (m[4] ?? '').trim() },
  ]),
);

describe('when the error table and docs/errors.md are compared', () => {
  it('should document every code of the table with its message and statuses', () => {
    for (const [code, row] of Object.entries(ERRORS) as [ErrorCode, { message: string; sipStatus?: number; httpStatus?: number }][]) {
      const entry = documented.get(code);
      expect(entry, `${code} is missing from docs/errors.md`).toBeDefined();
      expect(entry?.message, code).toBe(row.message);
      expect(entry?.sip, code).toBe(row.sipStatus === undefined ? '' : String(row.sipStatus));
      expect(entry?.http, code).toBe(row.httpStatus === undefined ? '' : String(row.httpStatus));
    }
  });

  it('should have no documented code that the table lacks', () => {
    const extra = [...documented.keys()].filter((code) => !(code in ERRORS));
    expect(extra).toEqual([]);
  });

  it('should name every code CALLGATE_ERR_<AREA>_<WHAT>', () => {
    for (const code of Object.keys(ERRORS)) expect(code).toMatch(/^CALLGATE_ERR_[A-Z]+_[A-Z0-9_]+$/);
  });
});

describe('when an error is raised from the table', () => {
  it('should fill the template and carry its statuses', () => {
    const error = new CallgateError('CALLGATE_ERR_SIP_NO_COMMON_CODEC', { codecs: 'PCMU, PCMA' });
    expect(error.message).toBe('the offer has no codec in common with PCMU, PCMA');
    expect(error.sipStatus).toBe(488);
    expect(error.httpStatus).toBeUndefined();
    expect(new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId: 'op_1' }).httpStatus).toBe(404);
  });

  it('should leave a placeholder visible when a detail is missing', () => {
    expect(formatMessage('CALLGATE_ERR_OP_NOT_FOUND')).toBe('operation {operationId} does not exist');
  });
});
