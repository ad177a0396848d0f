--[[
  Records that a committed operation is owed a compensation (an undo), before it is admitted: a
  compensation that cannot be admitted now (busy, full, past its admission deadline) or whose
  admission is lost in a crash is admitted later by the owed-compensation pass, never dropped.

  KEYS[1] the original operation hash
  KEYS[2] owed compensations of the tenant (zset: original id -> ms owed since, Redis TIME)

  ARGV[1] the compensation request, a JSON object (action, args, scope, intentFields); the first
          request owed is kept, so every later try admits the same undo

  Output:
    {"OWED", tries, "1" if newly owed else "0", the request kept}   tries: compensations of this
                                                                     operation that failed so far
    {"LINKED", compensation id}   a compensation is already linked (running or committed)
  Errors (returned, not raised):
    {"ERR_NOT_FOUND"}
    {"ERR_ILLEGAL", current state}   only a COMMITTED operation can be compensated
]]
local found = redis.call("HMGET", KEYS[1], "state", "compensated_by", "operation_id", "compensation_tries")
if not found[1] then
  return {"ERR_NOT_FOUND"}
end
if found[1] ~= "COMMITTED" then
  return {"ERR_ILLEGAL", found[1]}
end
if found[2] then
  return {"LINKED", found[2]}
end
local created = redis.call("HSETNX", KEYS[1], "compensation_owed", ARGV[1])
local time = redis.call("TIME")
redis.call("ZADD", KEYS[2], "NX", tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), found[3])
return {"OWED", found[4] or "0", tostring(created), redis.call("HGET", KEYS[1], "compensation_owed")}
