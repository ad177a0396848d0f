/**
 * What each chaos gateway's callers went through, one JSON line per event in a file of its own,
 * appended and fsynced before the event counts: the record survives SIGKILL of the process and any
 * Redis fault, so the checker compares the ledger with what really happened on the calls.
 */
import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export type JournalEntry =
  | {
      readonly type: 'call_started';
      readonly at: number;
      readonly sessionId: string;
      readonly tenantId: string;
      readonly gatewayId: string;
    }
  /** The tool runtime's answer to one tool call of an intent. */
  | {
      readonly type: 'tool_answered';
      readonly at: number;
      readonly sessionId: string;
      readonly intentId: string;
      readonly tool: string;
      readonly status: string;
      readonly operationId?: string;
    }
  /** A result given to the caller: `completed` is heard to the end, anything else was cut off. */
  | {
      readonly type: 'result_played';
      readonly at: number;
      readonly sessionId: string;
      readonly operationId: string;
      readonly status: string;
    }
  | {
      readonly type: 'call_ended';
      readonly at: number;
      readonly sessionId: string;
      readonly phase: string;
    };

const FILE_PREFIX = 'journal-';

export class CallJournal {
  private readonly fd: number;

  constructor(dir: string, processName: string) {
    this.fd = openSync(join(dir, `${FILE_PREFIX}${processName}.jsonl`), 'a');
  }

  /** Durable when it returns: written and fsynced. */
  append(entry: JournalEntry): void {
    writeSync(this.fd, `${JSON.stringify(entry)}\n`);
    fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Every entry of every journal in `dir`; a line cut short by a SIGKILL is skipped. */
export function readJournals(dir: string): JournalEntry[] {
  const entries: JournalEntry[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.startsWith(FILE_PREFIX))
    .sort()) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        entries.push(JSON.parse(line) as JournalEntry);
      } catch {
        // the last line of a process killed while writing it
      }
    }
  }
  return entries;
}
