-- Model: none (sessions with locking off are not in the model; tests/failover.rs
-- runs this against a stopped replica).
-- Delete a session's data without its lock (locking = off), with wait_replicas.
-- KEYS[1] data, KEYS[2] this destroy's marker
-- ARGV[1] how long the marker lasts, in ms
-- Returns the number of keys deleted (0 or 1).
local n = redis.call('DEL', KEYS[1])
if n == 0 then
  -- Our first run (its reply lost) or another request's logout deleted it,
  -- and that one's WAIT may have fallen short. A DEL of nothing writes nothing
  -- for our WAIT to count (Redis 8 and Valkey count a link's own writes only);
  -- the marker does, after that deletion in the replication stream. It is
  -- written under maxmemory too (allow-oom, after a delete): a full Redis must
  -- not turn a logout into an error.
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
end
return n
