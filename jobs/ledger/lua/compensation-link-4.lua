--[[
  Links an admitted compensation to the operation it undoes (compensated_by), and moves the undo
  from owed to in flight in the same step (its request stays in compensation_owed until it has
  settled, so an undo not started in time can be owed again: compensation-settle-4.lua). A compensation try that already ended without effect
  (FAILED_FINAL, CANCELLED) is not linked: if its end was settled already (its link released, it
  is compensation_failed) the caller's key is stale and the undo stays owed for the next key;
  otherwise (it ended before it was ever linked, after a crash) its failure is recorded here as
  compensation-settle-3.lua would have: the undo is no longer owed and the tries go up by one.

  KEYS[1] the original operation hash
  KEYS[2] the compensation operation hash
  KEYS[3] owed compensations of the tenant (zset: original id -> ms owed since)
  KEYS[4] compensations in flight of the tenant (zset: original id -> ms linked, Redis TIME)

  ARGV[1] compensation operation id

  Output:
    {"LINKED", compensation id}   linked now, or it already was
    {"OTHER", compensation id}    another compensation is linked
    {"STALE_TRY"}                 this compensation ended and was settled; admit with the next key
    {"TRY_ENDED", state, tries}   this compensation ended without effect, never linked: recorded
                                  as failed now
  Errors (returned, not raised):
    {"ERR_NOT_FOUND"}
    {"ERR_ILLEGAL", current state}   the original is not COMMITTED
]]
local found = redis.call("HMGET", KEYS[1], "state", "compensated_by", "operation_id", "compensation_failed")
if not found[1] then
  return {"ERR_NOT_FOUND"}
end
if found[1] ~= "COMMITTED" then
  return {"ERR_ILLEGAL", found[1]}
end
if found[2] == ARGV[1] then
  return {"LINKED", ARGV[1]}
end
if found[2] then
  return {"OTHER", found[2]}
end
local state = redis.call("HGET", KEYS[2], "state")
if not state then
  return {"ERR_NOT_FOUND"}
end
if state == "FAILED_FINAL" or state == "CANCELLED" then
  if found[4] == ARGV[1] then
    return {"STALE_TRY"}
  end
  redis.call("HSET", KEYS[1], "compensation_failed", ARGV[1])
  local tries = redis.call("HINCRBY", KEYS[1], "compensation_tries", 1)
  redis.call("HDEL", KEYS[1], "compensation_owed")
  redis.call("ZREM", KEYS[3], found[3])
  return {"TRY_ENDED", state, tostring(tries)}
end
redis.call("HSET", KEYS[1], "compensated_by", ARGV[1])
redis.call("ZREM", KEYS[3], found[3])
local time = redis.call("TIME")
redis.call("ZADD", KEYS[4], "NX", tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), found[3])
return {"LINKED", ARGV[1]}
