--[[
  Admits an operation: the ledger record is written before any job exists.

  KEYS[1] operation hash
  KEYS[2] operation history list
  KEYS[3] idempotency index (string: key -> operation id)
  KEYS[4] open operations of the tenant (zset: id -> last transition ms)
  KEYS[5] active operations of the action, counted against capacity (zset: id -> admitted ms):
          admitted, running or waiting to retry; not UNKNOWN ones (transition-10.lua)
  KEYS[6] session index (zset: id -> created ms)
  KEYS[7] outbox: admitted operations not yet known to be enqueued (zset: id -> admitted ms)
  KEYS[8] coalesce index for identical concurrent reads (string: hash -> operation id)
  KEYS[9] retry budget: requests in the window (zset: id -> ms)

  ARGV[1] operation id
  ARGV[2] params hash
  ARGV[3] the caller's clock (ms) when it computed the deadlines in ARGV[5]: they are moved onto
          the Redis server's clock (deadline + redis_now() - ARGV[3]), which every later comparison
          uses, so a process whose clock is off does not shorten or stretch them
  ARGV[4] capacity: most active operations allowed for the action, -1 for no bound
  ARGV[5] fields of the new operation, a JSON object of strings
  ARGV[6] mode: "mutation" (dedupe by idempotency key), "read", or "coalesce" (share a running read)
  ARGV[7] retention of the session index, seconds
  ARGV[8] retry budget window (ms)

  Output:
    {"ADMITTED", id, active operations before this one}
    {"DUPLICATE", existing id, existing state}   same key, same params
    {"CONFLICT", existing id}                    same key, different params
    {"COALESCED", existing id, existing state}   an identical read is running; a request of another
                                                 session is recorded in its "joiners" field (JSON:
                                                 session id -> gateway id), so that session gets the
                                                 result event too
    {"FULL", active count}                       no room under the capacity
]]
local id = ARGV[1]
local now = redis_now()
local stamp = tostring(now)
local skew = now - tonumber(ARGV[3])
local capacity = tonumber(ARGV[4])
local mode = ARGV[6]

if mode == "mutation" then
  local existing = redis.call("GET", KEYS[3])
  if existing then
    local found = redis.call("HMGET", KEYS[1]:gsub("[^:]+$", existing), "params_hash", "state")
    if found[1] == false then
      -- The index outlived its operation (retention ran out): the key is free again.
      redis.call("DEL", KEYS[3])
    elseif found[1] == ARGV[2] then
      return {"DUPLICATE", existing, found[2]}
    else
      return {"CONFLICT", existing}
    end
  end
elseif mode == "coalesce" then
  local running = redis.call("GET", KEYS[8])
  if running then
    local runningKey = KEYS[1]:gsub("[^:]+$", running)
    local found = redis.call("HMGET", runningKey, "state", "session_id", "joiners")
    local state = found[1]
    if state and state ~= "COMMITTED" and state ~= "FAILED_FINAL" and state ~= "CANCELLED" then
      -- Another call joins the read: it is recorded, so the result event reaches its session too.
      local asked = cjson.decode(ARGV[5])
      local session = asked["session_id"]
      if session and session ~= found[2] then
        local joiners = found[3] and cjson.decode(found[3]) or {}
        if joiners[session] == nil then
          joiners[session] = asked["owner_gateway"] or ""
          redis.call("HSET", runningKey, "joiners", cjson.encode(joiners))
        end
      end
      return {"COALESCED", running, state}
    end
    redis.call("DEL", KEYS[8])
  end
end

local active = redis.call("ZCARD", KEYS[5])
if capacity >= 0 and active >= capacity then
  return {"FULL", active}
end

local flat = {}
local given = cjson.decode(ARGV[5])
for _, name in ipairs({"admission_deadline_at", "deadline_at"}) do
  if given[name] then given[name] = tostring(tonumber(given[name]) + skew) end
end
for k, v in pairs(given) do
  flat[#flat + 1] = k
  flat[#flat + 1] = v
end
-- The record's own fields come last, so they win over any of the same name.
for _, v in ipairs({"state", "ADMITTED", "attempt", "0", "sending", "0", "params_hash", ARGV[2], "created_at", stamp, "admitted_at", stamp}) do
  flat[#flat + 1] = v
end
redis.call("HSET", KEYS[1], unpack(flat))
redis.call("RPUSH", KEYS[2],
  cjson.encode({state = "REQUESTED", at = now, attempt = 0, actor = "admission", reason = "tool_requested"}),
  cjson.encode({state = "ADMITTED", at = now, attempt = 0, actor = "admission", reason = "admitted"}))
if mode == "mutation" then
  redis.call("SET", KEYS[3], id)
elseif mode == "coalesce" then
  redis.call("SET", KEYS[8], id)
end
-- Scores are given as the caller's strings: a Lua number would be printed and parsed again.
redis.call("ZADD", KEYS[4], stamp, id)
redis.call("ZADD", KEYS[5], stamp, id)
redis.call("ZADD", KEYS[6], stamp, id)
redis.call("EXPIRE", KEYS[6], tonumber(ARGV[7]))
redis.call("ZADD", KEYS[7], stamp, id)
redis.call("ZREMRANGEBYSCORE", KEYS[9], "-inf", now - tonumber(ARGV[8]))
redis.call("ZADD", KEYS[9], stamp, id)
return {"ADMITTED", id, active}
