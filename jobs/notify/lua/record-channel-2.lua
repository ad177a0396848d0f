--[[
  Writes where one channel's out-of-band message stands (field oob:<channel> of the operation),
  forward only: a delivered message stays delivered, queueing it again never resets a message
  already queued, and only a message whose sending ended (it gave up, or its job is gone) is queued
  again by a re-drive, at most ARGV[5] times when that is set. Times come from Redis TIME.

  KEYS[1] operation hash
  KEYS[2] the tenant's given-up messages: zset of "<operation id> <channel>" -> first queued (ms)
  ARGV[1] channel (webhook | sms)
  ARGV[2] what happened: queue | failed | gave_up | delivered | redrive
  ARGV[3] attempts made (failed, gave_up, delivered), else "0"
  ARGV[4] error text (failed, gave_up), or ""
  ARGV[5] queue: the message as JSON, kept once as oob:message for re-drives;
          redrive: most re-drives allowed, "0" for no bound
  ARGV[6] redrive: "1" when the caller found the channel's job gone or failed (a message still
          marked queued or failed is then queued again too), else "0"

  Output: {"OK", record JSON} written
    | {"AS_IS", record JSON} nothing to do (already queued or delivered, or still being sent)
    | {"BOUND", record JSON} the re-drives are used up
    | {"ERR_NOT_FOUND"} no such operation
]]
local id = redis.call("HGET", KEYS[1], "operation_id")
if not id then
  return {"ERR_NOT_FOUND"}
end
local field = "oob:" .. ARGV[1]
local member = id .. " " .. ARGV[1]
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local raw = redis.call("HGET", KEYS[1], field)
local current = nil
if raw then current = cjson.decode(raw) end
local mode = ARGV[2]

local function write(state, attempts, redrives)
  local record = {
    state = state,
    attempts = attempts,
    at = now,
    redrives = redrives,
    since = (current and current.since) or now,
  }
  if ARGV[4] ~= "" and (state == "failed" or state == "gave_up") then record.error = ARGV[4] end
  local encoded = cjson.encode(record)
  redis.call("HSET", KEYS[1], field, encoded)
  return record, encoded
end

local redrives = (current and current.redrives) or 0

if mode == "queue" then
  if current then return {"AS_IS", raw} end
  if ARGV[5] ~= "" then redis.call("HSETNX", KEYS[1], "oob:message", ARGV[5]) end
  local _, encoded = write("queued", 0, 0)
  return {"OK", encoded}
end

if current and current.state == "delivered" then
  return {"AS_IS", raw}
end

if mode == "delivered" then
  local _, encoded = write("delivered", tonumber(ARGV[3]), redrives)
  redis.call("ZREM", KEYS[2], member)
  return {"OK", encoded}
end

if mode == "failed" then
  local _, encoded = write("failed", tonumber(ARGV[3]), redrives)
  return {"OK", encoded}
end

if mode == "gave_up" then
  local record, encoded = write("gave_up", tonumber(ARGV[3]), redrives)
  redis.call("ZADD", KEYS[2], record.since, member)
  return {"OK", encoded}
end

if mode == "redrive" then
  if not current then return {"AS_IS", ""} end
  if current.state ~= "gave_up" and ARGV[6] ~= "1" then return {"AS_IS", raw} end
  local bound = tonumber(ARGV[5])
  if bound > 0 and redrives >= bound then return {"BOUND", raw} end
  local _, encoded = write("queued", 0, redrives + 1)
  redis.call("ZREM", KEYS[2], member)
  return {"OK", encoded}
end

return redis.error_reply("unknown mode " .. mode)
