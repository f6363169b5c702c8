-- claim_worker.lua: register a worker name, unless a live worker already holds it.
--
-- KEYS[1]  workers  ZSET ns:workers (member = worker name, score = its last refresh, ms)
-- ARGV[1]  worker   the name to claim
-- ARGV[2]  now_ms   the caller's clock
-- ARGV[3]  ttl_ms   an entry refreshed less than this long ago belongs to a live worker
--
-- Returns {1} when the name was free or stale (its entry is now written with now_ms), or
-- {0, last_refresh_ms} when a live entry holds it.

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > tonumber(ARGV[2]) - tonumber(ARGV[3]) then
    return {0, math.floor(tonumber(score))}
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return {1}
