-- Model: tests/model/redis.rs, Script::resolve (one atomic step).
-- Settle an attempt whose reply was lost, or a waiter that gives up: if its token
-- holds the lock (alone or shared), it is ours; if not, the token leaves the queue.
-- Either way the token is voided: an attempt of it still on its way (it may sit
-- in a socket buffer) then takes nothing when it reaches Redis, whether the
-- token holds nothing or holds the lease (adopted, then released, the late
-- attempt would take it again for nobody). The marker stops a token's fresh
-- claims only, never its conversions (acquire.lua's 'u' and 'd'), which act on
-- what the token holds.
-- KEYS[1] lock, KEYS[2] waiters, KEYS[3] their terms, KEYS[4] void marker of this
-- token, KEYS[5] shared holds, KEYS[6] (sessions only) the session's data
-- ARGV[1] token, ARGV[2] how long the void marker lasts, in ms
-- Returns {pttl, fence} when it holds the lock alone ({pttl, fence, data} for a
-- session), {pttl, '-'} for a shared hold, nil otherwise.
local lock, token = KEYS[1], ARGV[1]
local value = redis.call('GET', lock)
unwake(lock, token)
-- Best effort where the token holds the lease: under maxmemory this SET is
-- refused, and the answer must still come.
local function void_holder()
  redis.pcall('SET', KEYS[4], '1', 'PX', ARGV[2])
end
if owns(value, token) then
  void_holder()
  if KEYS[6] then
    local data, err = read_held_data(KEYS[6], lock, KEYS[2], KEYS[3])
    if err then
      return err
    end
    return {redis.call('PTTL', lock), string.sub(value, #token + 2), data}
  end
  return {redis.call('PTTL', lock), string.sub(value, #token + 2)}
end
leave_queue(KEYS[2], KEYS[3], token)
local ends = tonumber(redis.call('ZSCORE', KEYS[5], token))
local now = now_ms()
if ends and ends > now then
  void_holder()
  return {ends - now, '-'}
end
redis.call('SET', KEYS[4], '1', 'PX', ARGV[2])
return false
