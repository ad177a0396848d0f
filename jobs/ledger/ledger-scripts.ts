/**
 * Loads the ledger's Lua scripts (jobs/ledger/lua/*.lua, named `<name>-<key count>.lua`) onto an
 * ioredis connection. Each script gets a prelude with the legal-transition table generated from
 * operation.ts, so the TypeScript and the Redis views of the state machine are one table.
 * operation-ledger.ts is the only module that calls these commands.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { LEGAL_TRANSITIONS, TERMINAL_STATES } from './operation.ts';

const LUA_DIR = fileURLToPath(new URL('./lua/', import.meta.url));

export type ScriptReply = (string | number | null)[] | number;

export interface LedgerCommands {
  ledgerAdmit(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerTransition(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerStart(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerSetFenced(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerLeaseRenew(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerRetryBudget(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerCompensationOwe(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerCompensationLink(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerCompensationSettle(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerRecordDelivery(...args: (string | number)[]): Promise<ScriptReply>;
  ledgerWithdrawAdmission(...args: (string | number)[]): Promise<ScriptReply>;
}

function prelude(): string {
  const legal = Object.entries(LEGAL_TRANSITIONS)
    .map(([from, tos]) => `${from} = {${tos.map((to) => `${to} = true`).join(', ')}}`)
    .join(', ');
  const terminal = [...TERMINAL_STATES].map((s) => `${s} = true`).join(', ');
  return `local LEGAL = {${legal}}\nlocal TERMINAL = {${terminal}}\n${SHARED_LUA}`;
}

/**
 * Helpers every script shares. Times that scripts compare (leases, deadlines, the retry budget's
 * window) come from the Redis server's clock, never from the calling process: two processes whose
 * clocks differ by seconds still agree on whether a lease expired (test/integration/ledger/
 * clock-offset.test.ts).
 */
const SHARED_LUA = `
local function redis_now()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lease_holder(id, attempt)
  return id .. ":" .. tostring(attempt)
end
`;

function commandName(file: string): string {
  const base = file.replace(/-\d+\.lua$/, '');
  return `ledger${base.replace(/(^|-)([a-z])/g, (_m, _d: string, c: string) => c.toUpperCase())}`;
}

/** Defines the ledger commands on `redis` (idempotent per connection). */
export function loadLedgerScripts(redis: Redis): Redis & LedgerCommands {
  const head = prelude();
  for (const file of readdirSync(LUA_DIR)) {
    const match = /-(\d+)\.lua$/.exec(file);
    if (!match) continue;
    const name = commandName(file);
    if (name in redis) continue;
    const body = readFileSync(`${LUA_DIR}${file}`, 'utf8');
    redis.defineCommand(name, { numberOfKeys: Number(match[1]), lua: `${head}${body}` });
  }
  return redis as Redis & LedgerCommands;
}
