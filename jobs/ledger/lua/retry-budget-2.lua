--[[
  Spends one retry from an action's budget if the budget allows it: retries over the window may be
  at most max(minimum, ratio * requests over the window). Requests are recorded at admission.

  KEYS[1] requests in the window (zset: operation id -> ms)
  KEYS[2] retries in the window (zset: operation id:attempt -> ms)
  ARGV[1] window (ms), measured on the Redis server's clock
  ARGV[2] ratio
  ARGV[3] minimum retries always allowed per window
  ARGV[4] member for this retry (operation id:attempt)

  Output: {allowed (1|0), requests, retries before this one}
]]
local now = redis_now()
local since = now - tonumber(ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", since)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", since)
local requests = redis.call("ZCARD", KEYS[1])
local retries = redis.call("ZCARD", KEYS[2])
local allowance = math.max(tonumber(ARGV[3]), math.floor(tonumber(ARGV[2]) * requests))
if retries < allowance then
  redis.call("ZADD", KEYS[2], now, ARGV[4])
  redis.call("PEXPIRE", KEYS[2], tonumber(ARGV[1]))
  return {1, requests, retries}
end
return {0, requests, retries}
