--TEST--
Bridge, Laravel locks under php-fpm: a Cache::lock()->block() counter race on the redis_lease store makes 100 of 100 increments (timed beside Laravel's own redis lock); a lock taken in one request outlives it and is released with restoreLock() in another; forceRelease() hands it to a waiter at once; a detached hold expires at its ttl and seconds = 0 is the configured finite ttl; Route::block() serializes a session's requests through the store
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
$env = ['APP_BASE' => $base, 'APP_SESSION_DRIVER' => 'file', 'APP_LEASE_DSN' => $srv['dsn'], 'APP_REDIS_PORT' => $srv['port']];
$req = fn (string $path, array $query = [], ?string $sid = null) => br_laravel_req($env, $path, $query, $sid);
// The store's keys: redis_lease's lock prefix, then the cache prefix "bridge_test" as "bridge_test:<name>".
$key = fn (string $name) => rl_lock_key("bridge_test:$name");
const N = 100;

// Every worker loads the application and connects to Redis through both stores before anything is timed.
$warm = rl_tempfile('.counter');
file_put_contents($warm, '0');
foreach (['leases', 'redis'] as $store) {
    $pool->client()->multi(array_map(fn ($i) => $req('/lock/counter', ['store' => $store, 'file' => $warm]), range(1, 32)), 30.0);
}

// 1. The counter race: each request increments a file under Cache::store(...)->lock('counter')->block().
foreach (['leases' => 'redis_lease store', 'redis' => 'Laravel\'s redis store (polls every 250 ms)'] as $store => $label) {
    $file = rl_tempfile('.counter');
    file_put_contents($file, '0');
    $raw->cmd('CONFIG', 'RESETSTAT');
    $t = microtime(true);
    $rs = $pool->client()->multi(array_map(fn ($i) => $req('/lock/counter', ['store' => $store, 'file' => $file]), range(1, N)), 60.0);
    $wall = microtime(true) - $t;
    $count = (int) file_get_contents($file);
    printf("info: Cache::lock()->block() counter race, %s: %d of %d increments, %.3f s\n", $label, $count, N, $wall);
    rl_same("$label: every request answered 200", [], br_broken($rs));
    if ($store === 'leases') {
        rl_same("$label: 100 of 100 increments", N, $count);
        $seen = array_map(fn ($r) => $r->json()['n'] ?? 0, $rs);
        sort($seen);
        rl_same("$label: each request saw the one before it (1..100)", range(1, N), $seen);
        rl_same("$label: the lock is free afterwards", 0, $raw->cmd('EXISTS', $key('counter')));
        // Waiting is a queue with handoff: about one script to take (or queue for) the lock and one to
        // release it per request; polling every 250 ms would add one per poll.
        $stats = rl_cmdstats($raw);
        $scripts = ($stats['fcall'] ?? 0) + ($stats['evalsha'] ?? 0) + ($stats['eval'] ?? 0);
        rl_ok("$label: at most 3 lock scripts per request (no polling)", $scripts <= 3 * N, "$scripts scripts");
    }
}

// 2. Taken in one request (get() without a callback), kept after it, released in another request.
$got = br_json($pool, $req('/lock/get', ['name' => 'handover', 'seconds' => 30]), 'get');
rl_same('a request takes the lock', true, $got['got'] ?? null);
rl_ok('owner() is the hold\'s token', (bool) preg_match('/^[0-9a-f]{32}$/', (string) ($got['owner'] ?? '')), json_encode($got));
$pttl = $raw->cmd('PTTL', $key('handover'));
rl_ok('the lock outlived the request, with its 30 s ttl', $pttl > 28000 && $pttl <= 30000, rl_fmt($pttl));
$other = br_json($pool, $req('/lock/get', ['name' => 'handover', 'seconds' => 30]), 'get again');
rl_same('another request cannot take it', false, $other['got'] ?? null);
$rel = br_json($pool, $req('/lock/release', ['name' => 'handover', 'owner' => $got['owner'] ?? '']), 'release');
rl_same('another request releases it with restoreLock($name, $owner)->release()', true, $rel['released'] ?? null);
rl_same('... the lock is free', 0, $raw->cmd('EXISTS', $key('handover')));
$rel = br_json($pool, $req('/lock/release', ['name' => 'handover', 'owner' => $got['owner'] ?? '']), 'release again');
rl_same('... a second release: false', false, $rel['released'] ?? null);

// 3. forceRelease() hands the lock to the request waiting for it, at once.
br_json($pool, $req('/lock/get', ['name' => 'forced', 'seconds' => 30]), 'get');
$waiter = $pool->client()->begin($req('/lock/block', ['name' => 'forced', 'seconds' => 30, 'wait' => 10])['params']);
rl_ok('a request waits in block()', br_wait(fn () => $raw->cmd('ZCARD', $key('forced') . ':waiters') === 1, 5.0, [$waiter]));
$forced = br_json($pool, $req('/lock/force', ['name' => 'forced']), 'force');
FcgiClient::await([$waiter], 10.0);
$w = $waiter->response->json() ?? [];
rl_same('the waiter got the lock', true, $w['got'] ?? null);
$delay = ($w['at'] ?? INF) - ($forced['at'] ?? 0);
rl_ok('at once after forceRelease() (well under its 10 s wait and the 30 s ttl)', $delay < 0.5, sprintf('%.3f s', $delay));

// 4. A detached hold expires at its ttl; seconds = 0 is the store's unbounded_ttl (120 s here), not forever.
$short = br_json($pool, $req('/lock/get', ['name' => 'short', 'seconds' => 1]), 'get 1 s');
rl_same('a 1 s lock is taken', true, $short['got'] ?? null);
rl_same('... and still held after its request', 1, $raw->cmd('EXISTS', $key('short')));
$t = microtime(true);
rl_ok('... until its ttl ends', rl_wait_until(fn () => $raw->cmd('EXISTS', $key('short')) === 0, 3.0, 0.01));
rl_ok('... not much later (within 1.2 s)', microtime(true) - $t < 1.2, sprintf('%.3f s', microtime(true) - $t));
$zero = br_json($pool, $req('/lock/get', ['name' => 'zero', 'seconds' => 0]), 'get 0 s');
$pttl = $raw->cmd('PTTL', $key('zero'));
rl_ok('seconds = 0 without a callback: the configured finite ttl (unbounded_ttl = 120 s)', ($zero['got'] ?? null) === true
    && $pttl > 118000 && $pttl <= 120000, rl_fmt($pttl));

// 5. Route::block(): StartSession locks "session:<id>" on session.block_store around the request. The file
// driver does not lock, so it is what keeps 30 concurrent requests of one session from losing keys.
$sid = br_laravel_sid();
$rs = $pool->client()->multi(array_map(fn ($i) => $req('/blocked', ['key' => "k$i"], $sid), range(0, 29)), 60.0);
rl_same('Route::block(): every request answered 200', [], br_broken($rs));
$read = br_json($pool, $req('/session/read', [], $sid), 'read');
rl_same('Route::block() with the redis_lease block_store: 30 of 30 keys kept with the file driver', 30, count($read['keys'] ?? []));
rl_same('... its lock is released', 0, $raw->cmd('EXISTS', $key("session:$sid")));
rl_same('nothing reached PHP\'s error log', '', $pool->phpErrors());
echo "done\n";
?>
--EXPECTF--
info: Cache::lock()->block() counter race, redis_lease store: %d of 100 increments, %f s
ok: redis_lease store: every request answered 200
ok: redis_lease store: 100 of 100 increments
ok: redis_lease store: each request saw the one before it (1..100)
ok: redis_lease store: the lock is free afterwards
ok: redis_lease store: at most 3 lock scripts per request (no polling)
info: Cache::lock()->block() counter race, Laravel's redis store (polls every 250 ms): %d of 100 increments, %f s
ok: Laravel's redis store (polls every 250 ms): every request answered 200
ok: a request takes the lock
ok: owner() is the hold's token
ok: the lock outlived the request, with its 30 s ttl
ok: another request cannot take it
ok: another request releases it with restoreLock($name, $owner)->release()
ok: ... the lock is free
ok: ... a second release: false
ok: a request waits in block()
ok: the waiter got the lock
ok: at once after forceRelease() (well under its 10 s wait and the 30 s ttl)
ok: a 1 s lock is taken
ok: ... and still held after its request
ok: ... until its ttl ends
ok: ... not much later (within 1.2 s)
ok: seconds = 0 without a callback: the configured finite ttl (unbounded_ttl = 120 s)
ok: Route::block(): every request answered 200
ok: Route::block() with the redis_lease block_store: 30 of 30 keys kept with the file driver
ok: ... its lock is released
ok: nothing reached PHP's error log
done
