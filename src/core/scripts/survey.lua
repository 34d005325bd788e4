-- What an operator sees of one lease (RedisLease\inspect()): read only, one
-- consistent snapshot, so a holder and its waiters are never from two moments.
-- KEYS[1] lock, KEYS[2] shared holds, KEYS[3] their weights, KEYS[4] waiters,
-- KEYS[5] their terms, KEYS[6] fencing counter, KEYS[7] a session's data (optional)
-- ARGV[1] how many holders and waiters to list at most
-- Returns {now (ms), types, lock value, its pttl, holders, weights, waiters,
-- terms, counts (shared holds, waiters, shared holds that ran out), fence, data
-- size, data pttl}; `types` names each key's type, so
-- that a key that is not ours is reported, not read as if it were.
local cap = tonumber(ARGV[1])
local now = now_ms()
local types = {}
for i, key in ipairs(KEYS) do
  types[i] = redis.call('TYPE', key).ok
end
local expected = {'string', 'zset', 'hash', 'zset', 'hash', 'string', 'string'}
for i, t in ipairs(types) do
  if t ~= 'none' and t ~= expected[i] then
    return {now, types}
  end
end
local value = redis.call('GET', KEYS[1])
-- Live holds only, the first to end first: those that ran out linger until a
-- script drops them, and listed by rank they could fill the list (a thousand
-- crashed permit holders hid the live ones). Waiters in queue order.
local holders = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, cap)
local waiters = redis.call('ZRANGE', KEYS[4], 0, cap - 1, 'WITHSCORES')
local terms = {}
for i = 1, #waiters, 2 do
  terms[#terms + 1] = redis.call('HGET', KEYS[5], waiters[i]) or ''
end
local weights = {}
for i = 1, #holders, 2 do
  weights[#weights + 1] = redis.call('HGET', KEYS[3], holders[i]) or '1'
end
local size, data_pttl = -1, -2
if KEYS[7] then
  size = redis.call('STRLEN', KEYS[7])
  data_pttl = redis.call('PTTL', KEYS[7])
end
return {now, types, value, redis.call('PTTL', KEYS[1]), holders, weights, waiters, terms,
  {redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[4]), redis.call('ZCOUNT', KEYS[2], '-inf', now)},
  redis.call('GET', KEYS[6]), size, data_pttl}
