-- Destroy a session that this request does not hold: delete its data and revoke
-- whatever lease another request holds on it, so that request can no longer write
-- it back (its save is refused as a lost lease). A logout must take effect even
-- while another request of the session runs, or is kept running on purpose.
-- KEYS[1] data, KEYS[2] lock, KEYS[3] waiters, KEYS[4] their terms
-- Returns 1.
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  pass_on(KEYS[2], KEYS[3], KEYS[4], nil, no_data)
end
return 1
