/**
 * The gateway side's Redis scripts (agents/lua/*.lua, named `<name>-<key count>.lua`) and key
 * names: the gateway registry, judged on Redis's clock, and the fenced hold and settlement of
 * result stream entries. This module is the only one that calls these scripts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

const LUA_DIR = fileURLToPath(new URL('./lua/', import.meta.url));

interface DeliveryCommands {
  gatewayHeartbeat(...args: (string | number)[]): Promise<number>;
  gatewaysDead(...args: (string | number)[]): Promise<(string | number)[]>;
  resultHold(...args: (string | number)[]): Promise<number>;
  resultSettle(...args: (string | number)[]): Promise<number>;
}

function commands(redis: Redis): Redis & DeliveryCommands {
  for (const file of readdirSync(LUA_DIR)) {
    const match = /^(.*)-(\d+)\.lua$/.exec(file);
    if (!match) continue;
    const name = (match[1] ?? '').replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    if (name in redis) continue;
    redis.defineCommand(name, {
      numberOfKeys: Number(match[2]),
      lua: readFileSync(`${LUA_DIR}${file}`, 'utf8'),
    });
  }
  return redis as Redis & DeliveryCommands;
}

/** The registry of gateways: id -> last heartbeat (ms, Redis time). */
export function registryKey(prefix: string): string {
  return `${prefix}:gateways`;
}

/** The lock a janitor takes on a dead gateway's streams. */
export function janitorLockKey(prefix: string, gatewayId: string): string {
  return `${prefix}:janitor:${gatewayId}`;
}

/** Heartbeats (or resigns) on Redis's clock; returns Redis time in ms. */
export async function heartbeat(
  redis: Redis,
  prefix: string,
  gatewayId: string,
  mode: 'beat' | 'resign',
  deadAfterMs: number,
): Promise<number> {
  return Number(
    await commands(redis).gatewayHeartbeat(registryKey(prefix), gatewayId, mode, deadAfterMs),
  );
}

/** Gateways silent for longer than `deadAfterMs` on Redis's clock, with Redis time now. */
export async function deadGateways(
  redis: Redis,
  prefix: string,
  deadAfterMs: number,
): Promise<{ now: number; dead: { gatewayId: string; lastBeat: number }[] }> {
  const [now, ...rows] = await commands(redis).gatewaysDead(registryKey(prefix), deadAfterMs);
  const dead: { gatewayId: string; lastBeat: number }[] = [];
  for (let i = 0; i + 1 < rows.length; i += 2)
    dead.push({ gatewayId: String(rows[i]), lastBeat: Number(rows[i + 1]) });
  return { now: Number(now), dead };
}

/** A result stream entry as one consumer holds it. */
export interface HeldEntry {
  readonly key: string;
  readonly group: string;
  readonly consumer: string;
  readonly id: string;
}

/** Whether `entry` is still pending for its consumer; if so its idle time starts again. */
export async function holdEntry(redis: Redis, entry: HeldEntry): Promise<boolean> {
  return (await commands(redis).resultHold(entry.key, entry.group, entry.consumer, entry.id)) === 1;
}

/** Acknowledges and deletes `entry` if its consumer still holds it; false when it does not. */
export async function settleEntry(redis: Redis, entry: HeldEntry): Promise<boolean> {
  return (
    (await commands(redis).resultSettle(entry.key, entry.group, entry.consumer, entry.id)) === 1
  );
}
