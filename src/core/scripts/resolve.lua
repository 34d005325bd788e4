-- Model: tests/model/redis.rs, Script::resolve (one atomic step).
-- Settle an attempt whose reply was lost, or a waiter that gives up: if its token
-- holds the lock (alone or shared), it is ours; if not, the token leaves the queue
-- and is voided, so that the attempt, should it still reach Redis (it may sit in a
-- socket buffer), takes nothing. A token with a shared hold is never voided: an
-- upgrade that holds it as a reader only leaves the queue.
-- KEYS[1] lock, KEYS[2] waiters, KEYS[3] their terms, KEYS[4] void marker of this
-- token, KEYS[5] shared holds, KEYS[6] (sessions only) the session's data
-- ARGV[1] token, ARGV[2] how long the void marker lasts, in ms
-- Returns {pttl, fence} when it holds the lock alone ({pttl, fence, data} for a
-- session), {pttl, '-'} for a shared hold, nil otherwise.
local lock, token = KEYS[1], ARGV[1]
local value = redis.call('GET', lock)
unwake(lock, token)
if owns(value, token) then
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
  return {ends - now, '-'}
end
redis.call('SET', KEYS[4], '1', 'PX', ARGV[2])
return false
