--[[
  Begins an attempt of an operation that is due to run, in the step that reads it: a worker that
  knows the job's tenant and action needs no separate read before it starts. The operation moves
  ADMITTED or FAILED_RETRYABLE -> RUNNING (attempt + 1, marked sending, a new fence token) only if
  it is still within its deadlines and its attempts (every send after the first is an attempt that
  counts against the retry policy), of the action and bound to the provider the worker expects, and
  one of the action's leases is free (taken in the same step). Anything else changes nothing and
  returns the record as it is, for the worker to decide on it (cancel when late, fail when out of
  attempts, take over a lost attempt, reconcile, ...). Times are the Redis server's (redis_now).

  KEYS[1] operation hash
  KEYS[2] operation history list
  KEYS[3] open operations of the tenant (zset)
  KEYS[4] UNKNOWN operations of the tenant (zset)
  KEYS[5] concurrency leases of the action (zset: "<operation id>:<attempt>" -> expiry ms). Each
          attempt holds a lease of its own (keys.ts leaseHolder), so an attempt that stalled and was
          taken over still counts until it gives its lease back or the lease expires, and never
          gives back or renews the new attempt's; an attempt whose outcome is unknown keeps its lease
          until the outcome is settled or a bound passes (transition-10.lua "park")

  ARGV[1] fence token of the new attempt: random, made by the worker, so an attempt number that a
          Redis rollback hands out twice still has two different tokens
  ARGV[2] action the job names (the leases of KEYS[5] are this action's)
  ARGV[3] provider the worker will call
  ARGV[4] lease time to live (ms)
  ARGV[5] most leases at once
  ARGV[6] most attempts (retry.maxAttempts), counted in sent_attempts: attempts that may have
          reached the provider (one refused before its request left gives its count back)

  Output:
    {"STARTED", field, value, ...}   the record after the move (attempt is the new attempt)
    {"AS_IS", field, value, ...}     not due to start here: the record, unchanged
    {"NO_LEASE"}                     due, but every lease is taken (nothing was changed)
    {"ERR_NOT_FOUND"}
]]
local record = redis.call("HGETALL", KEYS[1])
if #record == 0 then
  return {"ERR_NOT_FOUND"}
end
local h = {}
for i = 1, #record, 2 do
  h[record[i]] = record[i + 1]
end

local now = redis_now()
local state = h["state"]
local due = false
if state == "ADMITTED" then
  due = now <= tonumber(h["admission_deadline_at"] or "0") and now <= tonumber(h["deadline_at"] or "0")
elseif state == "FAILED_RETRYABLE" then
  due = now <= tonumber(h["deadline_at"] or "0") and tonumber(h["sent_attempts"] or h["attempt"] or "0") < tonumber(ARGV[6])
end
if not due or h["action"] ~= ARGV[2] or h["provider"] ~= ARGV[3] or not LEGAL[state]["RUNNING"] then
  table.insert(record, 1, "AS_IS")
  return record
end

local id = h["operation_id"]
local attempt = tonumber(h["attempt"] or "0") + 1
redis.call("ZREMRANGEBYSCORE", KEYS[5], "-inf", now)
if redis.call("ZCARD", KEYS[5]) >= tonumber(ARGV[5]) then
  return {"NO_LEASE"}
end
redis.call("ZADD", KEYS[5], now + tonumber(ARGV[4]), lease_holder(id, attempt))

local tokens = h["attempt_tokens"]
local changed = {
  state = "RUNNING",
  attempt = tostring(attempt),
  sending = "1",
  sending_at = tostring(now),
  attempt_token = ARGV[1],
  attempt_tokens = (tokens and tokens ~= "") and (tokens .. "," .. ARGV[1]) or ARGV[1],
  sent_attempts = tostring(tonumber(h["sent_attempts"] or h["attempt"] or "0") + 1),
}
if attempt == 1 then changed["started_at"] = tostring(now) end
local flat = {}
for k, v in pairs(changed) do
  flat[#flat + 1] = k
  flat[#flat + 1] = v
  h[k] = v
end
redis.call("HSET", KEYS[1], unpack(flat))
redis.call("RPUSH", KEYS[2],
  cjson.encode({state = "RUNNING", at = now, attempt = attempt, actor = "worker", reason = attempt == 1 and "started" or "retry"}))
redis.call("ZREM", KEYS[4], id)
redis.call("ZADD", KEYS[3], now, id)

local out = {"STARTED"}
for k, v in pairs(h) do
  out[#out + 1] = k
  out[#out + 1] = v
end
return out
