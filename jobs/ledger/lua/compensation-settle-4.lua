--[[
  Settles a compensation in flight once it has ended. COMMITTED: the undo is done and the link
  stays. CANCELLED because it was not admitted to run within its admission deadline (the action
  stayed full; the provider was never called): the link is released and the undo is owed again,
  under the next key. FAILED_FINAL or any other CANCELLED (no effect): the link on the original
  is released, so a later undo can be tried (with the next idempotency key,
  comp_<id>_<tries + 1>); the failed try is kept in compensation_failed. Only the caller that gets
  RELEASED reports the failure, so it is counted once however many workers look.

  KEYS[1] the original operation hash
  KEYS[2] the compensation operation hash (the one the caller read in compensated_by)
  KEYS[3] compensations in flight of the tenant (zset: original id -> ms linked)
  KEYS[4] owed compensations of the tenant (zset: original id -> ms owed since, Redis TIME)

  ARGV[1] compensation operation id
  ARGV[2] original operation id (its index entry goes even if its hash expired)

  Output:
    {"OPEN", state}                               still running (or UNKNOWN, being reconciled)
    {"COMMITTED", action}                         done; no longer in flight
    {"REOWED", action, tries}                     not started in time; owed again
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
  redis.call("HDEL", KEYS[1], "compensation_owed")
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"COMMITTED", found[2] or ""}
end
if state == "CANCELLED" and redis.call("HEXISTS", KEYS[1], "compensation_owed") == 1 then
  local ok, err = pcall(cjson.decode, redis.call("HGET", KEYS[2], "error") or "")
  if ok and type(err) == "table" and err["code"] == "admission_deadline_passed" then
    redis.call("HDEL", KEYS[1], "compensated_by")
    local tries = redis.call("HINCRBY", KEYS[1], "compensation_tries", 1)
    redis.call("ZREM", KEYS[3], ARGV[2])
    local time = redis.call("TIME")
    redis.call("ZADD", KEYS[4], "NX", tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), ARGV[2])
    return {"REOWED", found[2] or "", tostring(tries)}
  end
end
if state == "FAILED_FINAL" or state == "CANCELLED" then
  redis.call("HDEL", KEYS[1], "compensated_by", "compensation_owed")
  redis.call("HSET", KEYS[1], "compensation_failed", ARGV[1])
  local tries = redis.call("HINCRBY", KEYS[1], "compensation_tries", 1)
  redis.call("ZREM", KEYS[3], ARGV[2])
  return {"RELEASED", found[2] or "", state, tostring(tries)}
end
return {"OPEN", state}
