-- lock_renew.lua: extend the session lock lease if the caller still holds it.
--
-- KEYS[1]  lock  STRING ns:{s:sid}:lock
-- ARGV[1]  token     the caller's lock token
-- ARGV[2]  lease_ms  new lease from now
--
-- Returns 1 when renewed, 0 when the lock is held by someone else or gone.

if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
