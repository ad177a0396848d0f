--[[
  Lists the gateways that stopped heartbeating, judged on Redis's clock (TIME): those whose last
  heartbeat is older than the dead threshold.

  KEYS[1] gateway registry (zset: gateway id -> ms of its last heartbeat, Redis time)
  ARGV[1] dead after (ms)

  Output: {Redis time (ms), gateway id, last heartbeat (ms), gateway id, last heartbeat, ...}
]]
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local rows = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[1]), "WITHSCORES")
local out = {now}
for i = 1, #rows do
  out[#out + 1] = rows[i]
end
return out
