--[[
  Checks that a consumer still holds a result stream entry (it is pending for that consumer) and,
  if so, resets the entry's idle time, so the entries of a gateway that is alive never look idle
  to a janitor (which claims only entries idle past the dead threshold). A consumer that no longer
  holds the entry lost it to a janitor and must stay silent about it.

  KEYS[1] result stream
  ARGV[1] consumer group
  ARGV[2] consumer
  ARGV[3] entry id

  Output: 1 when the consumer holds the entry (idle time reset), 0 when it does not
]]
local pending = redis.call("XPENDING", KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #pending == 0 then
  return 0
end
redis.call("XCLAIM", KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], "JUSTID")
return 1
