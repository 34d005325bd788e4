--TEST--
Bridge, a rolling deploy from Laravel's redis session driver to redis_lease (php-fpm): with session.lease_compat = 'redis' the redis_lease driver keeps sessions under the redis driver's own key (connection and cache prefixes, as that Laravel makes them) and format, so requests alternating between the two drivers each see every earlier write; the seeds' race keeps 100 of 100 on it and the redis driver reads them; without it a session of the redis driver is not seen (the loss it prevents); a bad value is refused by name
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$pool = br_pool();
$base = br_laravel_base();
const N = 100;
const LIFETIME = 7; // minutes
// "old": a worker still on Laravel's redis driver; "new": redis_lease with lease_compat; "plain": without it.
// "old-store"/"new-store": the same with session.store naming a cache store of its own; "packed": a new
// worker whose connection has a phpredis serializer.
$env = fn (string $worker) => ['APP_BASE' => $base, 'APP_LEASE_DSN' => $srv['dsn'], 'APP_REDIS_PORT' => $srv['port'],
    'APP_REDIS_PREFIX' => $worker === 'bare' ? '' : 'bridge_db:', 'APP_SESSION_LIFETIME' => LIFETIME,
    'APP_SESSION_DRIVER' => in_array($worker, ['old', 'old-store'], true) ? 'redis' : 'redis_lease',
    'APP_SESSION_COMPAT' => ['old' => 'null', 'new' => 'redis', 'plain' => 'null', 'bad' => 'nope', 'bare' => 'redis',
        'old-store' => 'null', 'new-store' => 'redis', 'packed' => 'redis'][$worker]]
    + ($worker === 'bare' ? ['APP_CACHE_PREFIX' => ''] : [])
    + (str_ends_with($worker, '-store') ? ['APP_SESSION_STORE' => 'sessions'] : [])
    + ($worker === 'packed' ? ['APP_REDIS_SERIALIZER' => '1'] : []);
$req = fn (string $worker, string $path, array $query, string $sid) => br_laravel_req($env($worker), $path, $query, $sid);
// Every key of a session: its data and, while a request holds it, its lock.
$keysOf = fn (string $sid) => $raw->cmd('KEYS', "*$sid*");

$pool->client()->multi(array_map(fn ($i) => br_laravel_req($env($i % 2 ? 'old' : 'new'), '/info', [], null), range(1, 32)), 30.0);
$info = br_json($pool, br_laravel_req($env('new'), '/info', [], null), 'info');
rl_same('lease_compat = redis: the driver is the redis_lease handler in the cache store\'s format',
    'RedisLease\Bridge\Laravel\CacheFormatSessionHandler', $info['handler'] ?? null);

// 1. One session, requests alternating between old and new workers, one at a time.
$sid = br_laravel_sid();
br_json($pool, $req('old', '/session/add', ['key' => 'k0'], $sid), 'old worker');
$keys = $keysOf($sid);
rl_ok('an old worker writes the session under its key (connection prefix, cache prefix, id)',
    count($keys) === 1 && str_starts_with($keys[0], 'bridge_db:bridge_test'), rl_fmt($keys));
$oldKey = $keys[0] ?? '';
$seen = [];
for ($i = 1; $i < 40; $i++) {
    $seen[] = br_json($pool, $req($i % 2 ? 'new' : 'old', '/session/add', ['key' => "k$i"], $sid), "request $i")['count_before'] ?? null;
}
rl_same('39 more requests, alternating new and old workers: each saw every earlier write', range(1, 39), $seen);
rl_same('... still one key, the old driver\'s: nothing moved', [$oldKey], $keysOf($sid));
$ttl = $raw->cmd('TTL', $oldKey);
rl_ok('... with the session lifetime as its ttl', $ttl > LIFETIME * 60 - 5 && $ttl <= LIFETIME * 60, rl_fmt($ttl));
rl_ok('... in the cache store\'s format (a serialized string)', str_starts_with((string) $raw->cmd('GET', $oldKey), 's:'));
$read = br_json($pool, $req('old', '/session/read', [], $sid), 'old read');
rl_same('an old worker reads all 40 keys', 40, count($read['keys'] ?? []));
$read = br_json($pool, $req('new', '/session/read', [], $sid), 'new read');
rl_same('a new worker reads all 40 keys', 40, count($read['keys'] ?? []));
$read = br_json($pool, $req('plain', '/session/read', [], $sid), 'plain read');
rl_same('without lease_compat the redis driver\'s session is not seen (what a switch would lose)', [], $read['keys'] ?? null);

// 2. The seeds' race on new workers, then read by an old one.
$sid = br_laravel_sid();
$rs = $pool->client()->multi(array_map(fn ($i) => $req('new', '/session/add', ['key' => "k$i", 'work_ms' => 2], $sid), range(0, N - 1)), 90.0);
rl_same('the race on new workers: every request answered 200', [], br_broken($rs));
$before = array_map(fn ($r) => $r->json()['count_before'] ?? -1, $rs);
sort($before);
rl_same('... they took turns (keys seen before adding = 0..99)', range(0, N - 1), $before);
$read = br_json($pool, $req('old', '/session/read', [], $sid), 'old read after the race');
rl_same('... an old worker reads all 100 keys', N, count($read['keys'] ?? []));
rl_same('... one key for the session, the old driver\'s', 1, count($keysOf($sid)));

// 3. Both kinds at once: the old workers take no lock, so this is the race as it was before the deploy.
$sid = br_laravel_sid();
$rs = $pool->client()->multi(array_map(fn ($i) => $req($i % 2 ? 'old' : 'new', '/session/add', ['key' => "k$i", 'work_ms' => 2], $sid), range(0, N - 1)), 90.0);
$read = br_json($pool, $req('new', '/session/read', [], $sid), 'read after the mixed race');
printf("info: mixed race, half the requests on old workers (no lock): %d of %d keys kept\n", count($read['keys'] ?? []), N);
rl_same('... every request answered 200', [], br_broken($rs));

// session.store names another cache store (its own prefix): both drivers keep the session there.
$sid = br_laravel_sid();
br_json($pool, $req('old-store', '/session/add', ['key' => 'k0'], $sid), 'old worker, session.store');
$keys = $keysOf($sid);
rl_ok('session.store: an old worker writes under that store\'s prefix',
    count($keys) === 1 && str_starts_with($keys[0], 'bridge_db:bridge_sessions'), rl_fmt($keys));
rl_same('... a new worker sees its write', 1, br_json($pool, $req('new-store', '/session/add', ['key' => 'k1'], $sid), 'new worker, session.store')['count_before'] ?? null);
$read = br_json($pool, $req('old-store', '/session/read', [], $sid), 'old read, session.store');
rl_same('... and the old one the new one\'s, under the one key', [2, $keys], [count($read['keys'] ?? []), $keysOf($sid)]);
// A phpredis serializer on the connection packs what Laravel's driver stores: refused, saying so.
$r = $pool->client()->request($req('packed', '/session/read', [], br_laravel_sid())['params'], '', 20.0);
rl_ok('lease_compat = redis over a connection with a phpredis serializer: refused, saying so', $r->status === 500
    && str_contains($r->body, "phpredis's serializer"), $r->describe());

$r = $pool->client()->request($req('bad', '/session/read', [], br_laravel_sid())['params'], '', 20.0);
rl_ok('lease_compat = \'nope\': refused by name', $r->status === 500 && str_contains($r->body, 'session.lease_compat'), $r->describe());
// No prefix anywhere: the redis driver's sessions sit at bare ids, which the handler refuses to read as sessions.
$r = $pool->client()->request($req('bare', '/session/read', [], br_laravel_sid())['params'], '', 20.0);
rl_ok('lease_compat = redis with no prefix anywhere: refused, saying so', $r->status === 500
    && str_contains($r->body, 'bare ids') && str_contains($r->body, 'session.redis_lease.prefix'), $r->describe());
echo "done\n";
?>
--EXPECTF--
ok: lease_compat = redis: the driver is the redis_lease handler in the cache store's format
ok: an old worker writes the session under its key (connection prefix, cache prefix, id)
ok: 39 more requests, alternating new and old workers: each saw every earlier write
ok: ... still one key, the old driver's: nothing moved
ok: ... with the session lifetime as its ttl
ok: ... in the cache store's format (a serialized string)
ok: an old worker reads all 40 keys
ok: a new worker reads all 40 keys
ok: without lease_compat the redis driver's session is not seen (what a switch would lose)
ok: the race on new workers: every request answered 200
ok: ... they took turns (keys seen before adding = 0..99)
ok: ... an old worker reads all 100 keys
ok: ... one key for the session, the old driver's
info: mixed race, half the requests on old workers (no lock): %d of 100 keys kept
ok: ... every request answered 200
ok: session.store: an old worker writes under that store's prefix
ok: ... a new worker sees its write
ok: ... and the old one the new one's, under the one key
ok: lease_compat = redis over a connection with a phpredis serializer: refused, saying so
ok: lease_compat = 'nope': refused by name
ok: lease_compat = redis with no prefix anywhere: refused, saying so
done
