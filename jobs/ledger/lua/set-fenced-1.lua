--[[
  Sets fields on an operation without changing its state, only while it is in the expected state
  at the expected attempt (marking "sending", recording a cancel request or a provider reference).

  KEYS[1] operation hash
  ARGV[1] expected states, comma separated
  ARGV[2] expected attempt, or "" when not fenced
  ARGV[3] fields to set, a JSON object of strings
  ARGV[4] "1" to set only fields that are not set yet (HSETNX semantics)

  Output: {"OK"} | {"ERR_NOT_FOUND"} | {"ERR_ILLEGAL", current state} | {"ERR_STALE", current attempt}
    | {"ERR_EXISTS", field, current value} when ARGV[4] is "1" and a field is already set
]]
local state = redis.call("HGET", KEYS[1], "state")
if not state then
  return {"ERR_NOT_FOUND"}
end
local expected = false
for s in string.gmatch(ARGV[1], "[^,]+") do
  if s == state then expected = true end
end
if not expected then
  return {"ERR_ILLEGAL", state}
end
local attempt = redis.call("HGET", KEYS[1], "attempt") or "0"
if ARGV[2] ~= "" and ARGV[2] ~= attempt then
  return {"ERR_STALE", attempt}
end
local fields = cjson.decode(ARGV[3])
if ARGV[4] == "1" then
  for k, _ in pairs(fields) do
    local current = redis.call("HGET", KEYS[1], k)
    if current then return {"ERR_EXISTS", k, current} end
  end
end
for k, v in pairs(fields) do
  redis.call("HSET", KEYS[1], k, v)
end
return {"OK"}
