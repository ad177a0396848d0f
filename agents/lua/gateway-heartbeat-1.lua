--[[
  Writes a gateway's heartbeat into the registry on Redis's clock (TIME), never the gateway's own:
  a gateway whose clock runs behind must not look dead, nor one whose clock runs ahead look alive.

  KEYS[1] gateway registry (zset: gateway id -> ms of its last heartbeat, Redis time)
  ARGV[1] gateway id
  ARGV[2] "beat" (alive now) or "resign" (a clean shutdown: looks dead from now on, so the
          janitors take over its streams at once)
  ARGV[3] dead after (ms): a resigned gateway's heartbeat is set just past it

  Output: Redis time (ms) of the write
]]
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local score = now
if ARGV[2] == "resign" then
  score = now - tonumber(ARGV[3]) - 1
end
redis.call("ZADD", KEYS[1], score, ARGV[1])
return now
