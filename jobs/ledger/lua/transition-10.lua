--[[
  Moves one operation to a new state by compare-and-set, fenced by attempt. Terminal and UNKNOWN
  transitions append the result event to the owning gateway's stream (and to the stream of each
  session that joined a shared read) in the same step, so a result can never be recorded without
  its event, nor announced without being recorded.

  KEYS[1] operation hash
  KEYS[2] operation history list
  KEYS[3] open operations of the tenant (zset)
  KEYS[4] UNKNOWN operations of the tenant (zset: id -> ms it became UNKNOWN)
  KEYS[5] active operations of the action (capacity zset: admitted, running, waiting to retry). An
          operation leaves it on becoming UNKNOWN (nothing runs for it then, and a provider with no
          lookup may keep it UNKNOWN until an operator acts) and comes back if reconciliation sends
          it to retry; UNKNOWN operations are counted in KEYS[4] instead
  KEYS[6] result stream of the gateway that owns the session
  KEYS[7] idempotency index of the operation
  KEYS[8] coalesce index of the operation
  KEYS[9] outbox (zset)
  KEYS[10] concurrency leases of the action (zset: "<operation id>:<attempt>" -> expiry ms)

  ARGV[1] states the caller expects the operation to be in, comma separated
  ARGV[2] attempt the caller holds, or "" when the transition is not fenced
  ARGV[3] new state
  ARGV[4] fence token the caller holds (the attempt's attempt_token), or "" when not fenced by
          token; an attempt number handed out twice (a Redis rollback) does not match a token
  ARGV[5] actor
  ARGV[6] reason
  ARGV[7] fields to set, a JSON object of strings ("" values delete the field)
  ARGV[8] "1" to begin a new attempt (attempt + 1, sending cleared)
  ARGV[9] "1" to append a result event
  ARGV[10] retention (seconds) applied when the new state is terminal
  ARGV[11] event id to use for the result event
  ARGV[12] lease of the attempt (the holder "<id>:<attempt>", attempt as read before ARGV[8]),
          taken by start-5.lua:
           ""        none
           "release" the attempt's outcome is settled: give its lease back with the move
           "park"    the attempt's outcome is not settled (its request may still be at the
                     provider): keep its lease, no longer renewed, until sending_at + ARGV[13]
                     (the provider timeout plus the reconcile grace), unless settled sooner
           "settle"  the outcome of every attempt so far is settled (reconciled): give back the
                     leases of attempts 1 .. current
  ARGV[13] with "park": how long after sending_at (ms)
  ARGV[14] the tenant's result stream key without the gateway id: sessions that joined a shared read
           (the "joiners" field, written by admit-9.lua) get the result event in their own gateway's
           stream, under their own session id

  Output: {"OK", attempt, event id or ""}
  Errors (returned, not raised):
    {"ERR_NOT_FOUND"}
    {"ERR_ILLEGAL", current state}   current state is not expected, or the move is not legal
    {"ERR_STALE", current attempt}   the caller's attempt (or fence token) is not the current one

  Times (history, finished_at, lease expiries, index scores) are the Redis server's (redis_now).
]]
local current = redis.call("HMGET", KEYS[1], "state", "attempt", "operation_id", "tenant_id", "session_id", "admitted_at", "joiners", "attempt_token", "sending_at")
local state = current[1]
if not state then
  return {"ERR_NOT_FOUND"}
end
local to = ARGV[3]
local expected = false
for s in string.gmatch(ARGV[1], "[^,]+") do
  if s == state then expected = true end
end
if not expected or not LEGAL[state] or not LEGAL[state][to] then
  return {"ERR_ILLEGAL", state}
end
local attempt = tonumber(current[2] or "0")
if ARGV[2] ~= "" and tonumber(ARGV[2]) ~= attempt then
  return {"ERR_STALE", tostring(attempt)}
end
if ARGV[4] ~= "" and ARGV[4] ~= (current[8] or "") then
  return {"ERR_STALE", tostring(attempt)}
end
local now = redis_now()
local stamp = tostring(now)
local id = current[3]
local holder = lease_holder(id, attempt)
-- One HSET and at most one HDEL for the whole change, with the effect of applying in order: the
-- new attempt, the fields (an "" value deletes), the state and, when terminal, finished_at.
local set = {}
local unset = {}
if ARGV[8] == "1" then
  attempt = attempt + 1
  set[#set + 1] = "attempt"
  set[#set + 1] = tostring(attempt)
  set[#set + 1] = "sending"
  set[#set + 1] = "0"
end
for k, v in pairs(cjson.decode(ARGV[7])) do
  if v ~= "" then
    set[#set + 1] = k
    set[#set + 1] = v
  elseif k ~= "state" and not (k == "finished_at" and TERMINAL[to]) then
    unset[#unset + 1] = k
  end
end
set[#set + 1] = "state"
set[#set + 1] = to
if TERMINAL[to] then
  set[#set + 1] = "finished_at"
  set[#set + 1] = stamp
end
redis.call("HSET", KEYS[1], unpack(set))
if #unset > 0 then
  redis.call("HDEL", KEYS[1], unpack(unset))
end
redis.call("RPUSH", KEYS[2],
  cjson.encode({state = to, at = now, attempt = attempt, actor = ARGV[5], reason = ARGV[6]}))

if to == "UNKNOWN" then
  if state ~= "UNKNOWN" then redis.call("ZADD", KEYS[4], stamp, id) end
  redis.call("ZREM", KEYS[5], id)
else
  redis.call("ZREM", KEYS[4], id)
  if state == "UNKNOWN" and not TERMINAL[to] then
    -- Sent back to retry: it will run again, so it takes its place under the capacity again.
    redis.call("ZADD", KEYS[5], current[6] or stamp, id)
  end
end
if ARGV[12] == "release" then
  redis.call("ZREM", KEYS[10], holder)
elseif ARGV[12] == "park" then
  -- Only a lease the attempt still holds is kept: one that expired may be another attempt's slot now.
  local sentAt = tonumber(current[9] or "") or now
  -- GT: a lease held longer (its request may outlive this bound) is not shortened.
  redis.call("ZADD", KEYS[10], "XX", "GT", sentAt + tonumber(ARGV[13]), holder)
elseif ARGV[12] == "settle" then
  for n = 1, attempt do redis.call("ZREM", KEYS[10], lease_holder(id, n)) end
end

if TERMINAL[to] then
  redis.call("ZREM", KEYS[3], id)
  redis.call("ZREM", KEYS[5], id)
  redis.call("ZREM", KEYS[9], id)
  if redis.call("GET", KEYS[8]) == id then redis.call("DEL", KEYS[8]) end
  local retention = tonumber(ARGV[10])
  redis.call("EXPIRE", KEYS[1], retention)
  redis.call("EXPIRE", KEYS[2], retention)
  if redis.call("GET", KEYS[7]) == id then redis.call("EXPIRE", KEYS[7], retention) end
else
  redis.call("ZADD", KEYS[3], stamp, id)
end

local eventId = ""
if ARGV[9] == "1" then
  redis.call("XADD", KEYS[6], "*",
    "event_id", ARGV[11],
    "operation_id", id,
    "tenant_id", current[4],
    "session_id", current[5],
    "state", to,
    "attempt", tostring(attempt),
    "at", stamp)
  eventId = ARGV[11]
  if current[7] then
    for session, gateway in pairs(cjson.decode(current[7])) do
      redis.call("XADD", ARGV[14] .. gateway, "*",
        "event_id", ARGV[11] .. ":" .. session,
        "operation_id", id,
        "tenant_id", current[4],
        "session_id", session,
        "state", to,
        "attempt", tostring(attempt),
        "at", stamp)
    end
  end
end
return {"OK", tostring(attempt), eventId}
