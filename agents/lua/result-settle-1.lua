--[[
  Acknowledges and deletes a result stream entry, only for the consumer that holds it: a gateway
  whose entry was taken over by a janitor must not acknowledge it under the janitor (which may not
  have delivered it yet). Each stream has one consumer group, so an acknowledged entry is owed to
  nobody and goes with its acknowledgement.

  KEYS[1] result stream
  ARGV[1] consumer group
  ARGV[2] consumer
  ARGV[3] entry id

  Output: 1 when acknowledged and deleted, 0 when the consumer does not hold the entry
]]
local pending = redis.call("XPENDING", KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #pending == 0 then
  return 0
end
redis.call("XACK", KEYS[1], ARGV[1], ARGV[3])
redis.call("XDEL", KEYS[1], ARGV[3])
return 1
