-- Settle an acquire attempt whose reply was lost: if its token holds the lease,
-- it is ours; if not, void the token so that the attempt, should it still reach
-- Redis later (it may sit in a socket buffer), takes nothing.
-- KEYS[1] lock, KEYS[2] void marker of this token
-- ARGV[1] token, ARGV[2] how long the void marker lasts, in ms
-- Returns {pttl, fence} when ours, nil otherwise.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  return {redis.call('PTTL', KEYS[1]), string.sub(v, #ARGV[1] + 2)}
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return false
