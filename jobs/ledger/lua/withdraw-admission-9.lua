--[[
  Takes back an admission that could not be made durable before the caller was answered (the
  caller is told "busy", and nothing was admitted): everything admit-9.lua wrote for it goes, the
  idempotency key included, so the same request can be admitted again. Only an operation still
  ADMITTED with no attempt is taken back; one a worker has started stays (its own sending mark is
  made durable before its request leaves).

  KEYS[1]-KEYS[9] as for admit-9.lua (operation hash, history, idempotency index, open, active,
          session index, outbox, coalesce index, retry budget requests)
  ARGV[1] operation id

  Output: 1 when taken back, 0 when the operation moved on (or is not there)
]]
local id = ARGV[1]
local found = redis.call("HMGET", KEYS[1], "state", "attempt")
if found[1] ~= "ADMITTED" or (found[2] or "0") ~= "0" then
  return 0
end
redis.call("DEL", KEYS[1], KEYS[2])
for _, index in ipairs({KEYS[3], KEYS[8]}) do
  if redis.call("GET", index) == id then redis.call("DEL", index) end
end
for _, set in ipairs({KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[9]}) do
  redis.call("ZREM", set, id)
end
return 1
