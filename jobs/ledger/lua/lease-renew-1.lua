--[[
  Extends a lease its holder still has. Never takes one: a holder whose lease expired (and may
  have been taken) is told so, and must not act as if it still held it.

  KEYS[1] lease set of the tenant and action
  ARGV[1] holder: "<operation id>:<attempt>" (keys.ts leaseHolder)
  ARGV[2] now (ms)
  ARGV[3] lease time to live (ms)

  Output: 1 when renewed, 0 when the holder no longer has the lease (it expired and may be taken)
]]
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  redis.call("ZADD", KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0
