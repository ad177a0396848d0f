--[[
  Takes one of a tenant's concurrency leases for an action (a semaphore with expiring holders, so
  a crashed worker's lease frees itself).

  KEYS[1] lease set of the tenant and action (zset: operation id -> expiry ms)
  ARGV[1] holder (operation id)
  ARGV[2] now (ms)
  ARGV[3] lease time to live (ms); longer than the job lock, renewed while the job runs
  ARGV[4] most holders at once

  Output: 1 when the holder has a lease (newly or already), 0 when none is free
]]
local now = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  redis.call("ZADD", KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
if redis.call("ZCARD", KEYS[1]) < tonumber(ARGV[4]) then
  redis.call("ZADD", KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0
