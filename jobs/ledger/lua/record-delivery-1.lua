--[[
  Records how a result reached (or did not reach) one session's caller, forward only: a record
  moves up the stages below and never back, so a duplicate result event's "already told" cannot
  replace the record of a delivery in progress, and nothing replaces a final record.

    0 none
    1 duplicate    suppress because already told (or being told): written only over nothing
    2 in progress  any other gate decision not yet acted on (speak now, when idle, hold,
                   reconcile first, route, out of band decided); replaces 1 and 2 (the gate
                   judges again as the call moves on)
    3 final        spoken, out of band (queued or delivered), failed, suppress because no words
                   are needed (superseded without effect); replaces nothing

  KEYS[1] operation hash
  ARGV[1] field of the session's record ("delivery", or "delivery:<session id>" for a joiner)
  ARGV[2] the new record, JSON (a DeliveryRecord)

  Output: {1} when written | {0, current record JSON} when the current record is as far or
    further along | {-1} when the operation does not exist (expired): nothing is written
]]
local function has(list, wanted)
  if type(list) ~= "table" then return false end
  for _, value in ipairs(list) do
    if value == wanted then return true end
  end
  return false
end

local function stage(record)
  if type(record) ~= "table" then return 0 end
  if record.delivered == true or record.channel == "out_of_band" or record.decision == "spoken" or record.decision == "failed" then
    return 3
  end
  if record.decision == "suppress" then
    if has(record.reasons, "already_told") then return 1 end
    return 3
  end
  return 2
end

if redis.call("EXISTS", KEYS[1]) == 0 then
  return {-1}
end
local raw = redis.call("HGET", KEYS[1], ARGV[1])
local current = 0
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  current = ok and stage(decoded) or 0
end
local proposed = stage(cjson.decode(ARGV[2]))
if proposed > current or (proposed == current and proposed < 3) then
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
  return {1}
end
return {0, raw}
