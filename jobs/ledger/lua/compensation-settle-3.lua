--[[
  Settles a compensation in flight once it has ended. COMMITTED: the undo is done and the link
  stays. FAILED_FINAL or CANCELLED (no effect): the link on the original is released, so a later
  undo can be tried (with the next idempotency key, comp_<id>_<tries + 1>); the failed try is kept
  in compensation_failed. Only the caller that gets RELEASED reports the failure, so it is counted
  once however many workers look.

  KEYS[1] the original operation hash
  KEYS[2] the compensation operation hash (the one the caller read in compensated_by)
  KEYS[3] compensations in flight of the tenant (zset: original id -> ms linked)

  ARGV[1] compensation operation id
  ARGV[2] original operation id (its index entry goes even if its hash expired)

  Output:
    {"OPEN", state}                               still running (or UNKNOWN, being reconciled)
    {"COMMITTED", action}                         done; no longer in flight
    {"RELEASED", action, state, tries}            ended without effect; link released
    {"MOVED", compensation id}                    another compensation is linked now
    {"GONE"}                                      nothing is linked (or a record expired)
]]
local current = redis.call("HGET", KEYS[1], "compensated_by")
if not current then
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"GONE"}
end
if current ~= ARGV[1] then
  return {"MOVED", current}
end
local found = redis.call("HMGET", KEYS[2], "state", "action")
local state = found[1]
if not state then
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"GONE"}
end
if state == "COMMITTED" then
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"COMMITTED", found[2] or ""}
end
if state == "FAILED_FINAL" or state == "CANCELLED" then
  redis.call("HDEL", KEYS[1], "compensated_by")
  redis.call("HSET", KEYS[1], "compensation_failed", ARGV[1])
  local tries = redis.call("HINCRBY", KEYS[1], "compensation_tries", 1)
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"RELEASED", found[2] or "", state, tostring(tries)}
end
return {"OPEN", state}
