--[[
  Extends a lease its holder still has. Never takes one: a holder whose lease expired (and may
  have been taken) is told so, and must not act as if it still held it.

  KEYS[1] lease set of the tenant and action
  ARGV[1] holder: "<operation id>:<attempt>" (keys.ts leaseHolder)
  ARGV[2] lease time to live (ms), from the Redis server's clock

  Output: 1 when renewed, 0 when the holder no longer has the lease (it expired and may be taken)
]]
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if score and tonumber(score) > redis_now() then
  -- XX: a lease given back meanwhile is not taken again; GT: one parked longer is not shortened.
  redis.call("ZADD", KEYS[1], "XX", "GT", redis_now() + tonumber(ARGV[2]), ARGV[1])
  return 1
end
return 0
