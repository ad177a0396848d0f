import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CallgateError, ERRORS, formatMessage, type ErrorCode } from '../../../config/errors.ts';

const ROOT = new URL('../../../', import.meta.url);
const doc = readFileSync(new URL('docs/errors.md', ROOT), 'utf8');

/** The product's own TypeScript (not tests, bench or scripts), the table itself left out. */
function productSources(): string {
  return ['gateway', 'agents', 'jobs', 'config']
    .flatMap((folder) =>
      readdirSync(new URL(folder, ROOT), { recursive: true, encoding: 'utf8' }).map(
        (file) => `${folder}/${file}`,
      ),
    )
    .filter((path) => path.endsWith('.ts') && path !== 'config/errors.ts')
    .map((path) => readFileSync(new URL(path, ROOT), 'utf8'))
    .join('\n');
}
/** Rows of the catalogue: | `CODE` | message | SIP | HTTP | */
const documented = new Map(
  [...doc.matchAll(/^\|\s*`(CALLGATE_ERR_[A-Z0-9_]+)`\s*\|(.*)\|(.*)\|(.*)\|\s*$/gm)].map((m) => [
    m[1] as string,
    {
      message: (m[2] ?? '').trim().replace(/\\\|/g, '|'),
      sip: (m[3] ?? '').trim(),
      http: (m[4] ?? '').trim(),
    },
  ]),
);

describe('when the error table and docs/errors.md are compared', () => {
  it('should document every code of the table with its message and statuses', () => {
    for (const [code, row] of Object.entries(ERRORS) as [
      ErrorCode,
      { message: string; sipStatus?: number; httpStatus?: number },
    ][]) {
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

  it('should have no code that the product never raises', () => {
    const sources = productSources();
    const neverRaised = Object.keys(ERRORS).filter((code) => !sources.includes(`'${code}'`));
    expect(neverRaised).toEqual([]);
  });

  it('should name every code CALLGATE_ERR_<AREA>_<WHAT>', () => {
    for (const code of Object.keys(ERRORS))
      expect(code).toMatch(/^CALLGATE_ERR_[A-Z]+_[A-Z0-9_]+$/);
  });
});

describe('when an error is raised from the table', () => {
  it('should fill the template and carry its statuses', () => {
    const error = new CallgateError('CALLGATE_ERR_MEDIA_PORTS_EXHAUSTED', {
      portMin: 10000,
      portMax: 10100,
    });
    expect(error.message).toBe('no free RTP port in 10000-10100');
    expect(error.sipStatus).toBe(503);
    expect(error.httpStatus).toBeUndefined();
    expect(new CallgateError('CALLGATE_ERR_OP_NOT_FOUND', { operationId: 'op_1' }).httpStatus).toBe(
      404,
    );
  });

  it('should leave a placeholder visible when a detail is missing', () => {
    expect(formatMessage('CALLGATE_ERR_OP_NOT_FOUND')).toBe(
      'operation {operationId} does not exist',
    );
  });
});
