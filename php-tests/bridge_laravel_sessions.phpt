--TEST--
Bridge, Laravel sessions under php-fpm (Debian's Laravel 8.83): the provider is found by package discovery; the seeds' race keeps 100 of 100 keys with the redis_lease driver and with the bare handler object (Laravel's own redis and file drivers are run beside them and their counts printed); login (migrate(true)), logout (invalidate()), regenerate() and an early save keep what they should, answer 200, and the data key's ttl is session.lifetime * 60
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
const LIFETIME = 7; // minutes: a ttl (420 s) that is neither the default lifetime nor gc_maxlifetime
$env = fn (string $driver) => ['APP_BASE' => $base, 'APP_SESSION_DRIVER' => $driver, 'APP_LEASE_DSN' => $srv['dsn'],
    'APP_REDIS_PORT' => $srv['port'], 'APP_SESSION_LIFETIME' => LIFETIME];
$dataKey = fn (string $sid) => "PHPREDIS_SESSION:$sid";
// (Less the short-lived markers of writes of sessions a request did not hold.)
$lockKeys = fn (string $sid) => rl_session_lock_keys($raw, $sid);

// Every worker loads the application once (opcache) before anything is timed.
$pool->client()->multi(array_map(fn ($i) => br_laravel_req($env('file'), '/info'), range(1, 32)), 30.0);

$info = br_json($pool, br_laravel_req($env('redis_lease'), '/info'), 'info');
rl_ok('package discovery lists the bridge provider (from composer.json extra.laravel.providers)',
    in_array('RedisLease\Bridge\Laravel\RedisLeaseServiceProvider', $info['discovered'] ?? [], true), json_encode($info));
rl_ok('... and Laravel loaded it', in_array('RedisLease\Bridge\Laravel\RedisLeaseServiceProvider', $info['loaded'] ?? [], true));
rl_same('the redis_lease driver is the extension\'s handler', 'RedisLockingSessionHandler', $info['handler'] ?? null);

/** The seeds' race: N concurrent requests on one session, each adding its own key. */
function race(FpmPool $pool, array $env, string $sid): array
{
    $reqs = [];
    for ($i = 0; $i < N; $i++) {
        $reqs[$i] = br_laravel_req($env, '/session/add', ['key' => "k$i"], $sid);
    }
    $t = microtime(true);
    $rs = $pool->client()->multi($reqs, 60.0);
    $wall = microtime(true) - $t;
    $read = $pool->client()->request(br_laravel_req($env, '/session/read', [], $sid)['params'])->json();
    return [$rs, $wall, count($read['keys'] ?? [])];
}

$drivers = ['redis_lease' => 'the redis_lease driver', 'lease_object' => 'Session::extend() with the bare handler'];
foreach ($drivers as $driver => $label) {
    for ($round = 1; $round <= 2; $round++) {
        $sid = br_laravel_sid();
        [$rs, $wall, $kept] = race($pool, $env($driver), $sid);
        printf("info: Laravel, %s, round %d: %d of %d keys kept, %.3f s\n", $label, $round, $kept, N, $wall);
        rl_same("$label, round $round: every request answered 200 with JSON", [], br_broken($rs));
        rl_same("$label, round $round: all 100 keys kept", N, $kept);
        $before = array_map(fn ($r) => $r->json()['count_before'] ?? -1, $rs);
        sort($before);
        rl_same("$label, round $round: requests took turns (keys seen before adding = 0..99)", range(0, N - 1), $before);
        $ttl = $raw->cmd('TTL', $dataKey($sid));
        rl_ok("$label, round $round: data ttl is session.lifetime * 60", $ttl > LIFETIME * 60 - 30 && $ttl <= LIFETIME * 60, rl_fmt($ttl));
        rl_same("$label, round $round: no lock key left", [], $lockKeys($sid));
    }

    // Login: what Auth::login() does, migrate(true): a fresh id, written without being read.
    $a = br_laravel_sid();
    br_json($pool, br_laravel_req($env($driver), '/session/put', ['key' => 'cart', 'value' => 'apple'], $a), "$label: put");
    $login = br_json($pool, br_laravel_req($env($driver), '/session/login', [], $a), "$label: login");
    $b = $login['id'] ?? '';
    rl_ok("$label: login answered 200 with a fresh id", ($login['old'] ?? '') === $a && $b !== $a && strlen($b) === 40, json_encode($login));
    $read = br_json($pool, br_laravel_req($env($driver), '/session/read', [], $b), "$label: read after login");
    rl_same("$label: after login the new id has the data and the user", ['apple', 7],
        [$read['data']['cart'] ?? null, $read['data']['user'] ?? null]);
    rl_same("$label: ... the old id's data is gone", 0, $raw->cmd('EXISTS', $dataKey($a)));
    $ttl = $raw->cmd('TTL', $dataKey($b));
    rl_ok("$label: ... the new id's ttl is session.lifetime * 60", $ttl > LIFETIME * 60 - 30 && $ttl <= LIFETIME * 60, rl_fmt($ttl));

    // Logout: invalidate() empties the session and moves it to a fresh id.
    $logout = br_json($pool, br_laravel_req($env($driver), '/session/logout', [], $b), "$label: logout");
    $c = $logout['id'] ?? '';
    rl_ok("$label: logout answered 200 with a fresh id", ($logout['old'] ?? '') === $b && $c !== $b && strlen($c) === 40, json_encode($logout));
    $read = br_json($pool, br_laravel_req($env($driver), '/session/read', [], $c), "$label: read after logout");
    rl_same("$label: after logout nothing of the user is left", [null, null], [$read['data']['cart'] ?? null, $read['data']['user'] ?? null]);
    rl_same("$label: ... the logged-in id's data is gone", 0, $raw->cmd('EXISTS', $dataKey($b)));

    // regenerate(): a fresh id with the same data (the old one is kept, as Laravel does).
    $d = br_laravel_sid();
    br_json($pool, br_laravel_req($env($driver), '/session/put', ['key' => 'cart', 'value' => 'pear'], $d), "$label: put");
    $regen = br_json($pool, br_laravel_req($env($driver), '/session/regenerate', [], $d), "$label: regenerate");
    $e = $regen['id'] ?? '';
    rl_ok("$label: regenerate() answered 200 with a fresh id", $e !== $d && strlen($e) === 40, json_encode($regen));
    $read = br_json($pool, br_laravel_req($env($driver), '/session/read', [], $e), "$label: read after regenerate");
    rl_same("$label: the fresh id has the data", ['pear', true], [$read['data']['cart'] ?? null, $read['data']['regenerated'] ?? null]);

    // Early save, then StartSession's own save at the end of the request: both changes kept.
    $f = br_laravel_sid();
    br_json($pool, br_laravel_req($env($driver), '/session/early', [], $f), "$label: early save");
    $read = br_json($pool, br_laravel_req($env($driver), '/session/read', [], $f), "$label: read after early save");
    rl_same("$label: early save: what was put before and after it is kept", [1, 2], [$read['data']['early'] ?? null, $read['data']['late'] ?? null]);
    rl_same("$label: no lock key left by any of them", [], array_merge(...array_map($lockKeys, [$a, $b, $c, $d, $e, $f])));
}
rl_same('nothing reached PHP\'s error log (Laravel turns warnings into errors)', '', $pool->phpErrors());

// Laravel's own drivers, in the same run: printed, not asserted (they do not lock).
foreach (['redis' => 'Laravel\'s redis driver (phpredis)', 'file' => 'Laravel\'s file driver'] as $driver => $label) {
    for ($round = 1; $round <= 2; $round++) {
        [$rs, $wall, $kept] = race($pool, $env($driver), br_laravel_sid());
        printf("info: Laravel, %s, round %d: %d of %d keys kept, %.3f s\n", $label, $round, $kept, N, $wall);
        rl_same("$label, round $round: every request answered 200", [], br_broken($rs));
    }
}
echo "done\n";
?>
--EXPECTF--
ok: package discovery lists the bridge provider (from composer.json extra.laravel.providers)
ok: ... and Laravel loaded it
ok: the redis_lease driver is the extension's handler
info: Laravel, the redis_lease driver, round 1: %d of 100 keys kept, %f s
ok: the redis_lease driver, round 1: every request answered 200 with JSON
ok: the redis_lease driver, round 1: all 100 keys kept
ok: the redis_lease driver, round 1: requests took turns (keys seen before adding = 0..99)
ok: the redis_lease driver, round 1: data ttl is session.lifetime * 60
ok: the redis_lease driver, round 1: no lock key left
info: Laravel, the redis_lease driver, round 2: %d of 100 keys kept, %f s
ok: the redis_lease driver, round 2: every request answered 200 with JSON
ok: the redis_lease driver, round 2: all 100 keys kept
ok: the redis_lease driver, round 2: requests took turns (keys seen before adding = 0..99)
ok: the redis_lease driver, round 2: data ttl is session.lifetime * 60
ok: the redis_lease driver, round 2: no lock key left
ok: the redis_lease driver: login answered 200 with a fresh id
ok: the redis_lease driver: after login the new id has the data and the user
ok: the redis_lease driver: ... the old id's data is gone
ok: the redis_lease driver: ... the new id's ttl is session.lifetime * 60
ok: the redis_lease driver: logout answered 200 with a fresh id
ok: the redis_lease driver: after logout nothing of the user is left
ok: the redis_lease driver: ... the logged-in id's data is gone
ok: the redis_lease driver: regenerate() answered 200 with a fresh id
ok: the redis_lease driver: the fresh id has the data
ok: the redis_lease driver: early save: what was put before and after it is kept
ok: the redis_lease driver: no lock key left by any of them
info: Laravel, Session::extend() with the bare handler, round 1: %d of 100 keys kept, %f s
ok: Session::extend() with the bare handler, round 1: every request answered 200 with JSON
ok: Session::extend() with the bare handler, round 1: all 100 keys kept
ok: Session::extend() with the bare handler, round 1: requests took turns (keys seen before adding = 0..99)
ok: Session::extend() with the bare handler, round 1: data ttl is session.lifetime * 60
ok: Session::extend() with the bare handler, round 1: no lock key left
info: Laravel, Session::extend() with the bare handler, round 2: %d of 100 keys kept, %f s
ok: Session::extend() with the bare handler, round 2: every request answered 200 with JSON
ok: Session::extend() with the bare handler, round 2: all 100 keys kept
ok: Session::extend() with the bare handler, round 2: requests took turns (keys seen before adding = 0..99)
ok: Session::extend() with the bare handler, round 2: data ttl is session.lifetime * 60
ok: Session::extend() with the bare handler, round 2: no lock key left
ok: Session::extend() with the bare handler: login answered 200 with a fresh id
ok: Session::extend() with the bare handler: after login the new id has the data and the user
ok: Session::extend() with the bare handler: ... the old id's data is gone
ok: Session::extend() with the bare handler: ... the new id's ttl is session.lifetime * 60
ok: Session::extend() with the bare handler: logout answered 200 with a fresh id
ok: Session::extend() with the bare handler: after logout nothing of the user is left
ok: Session::extend() with the bare handler: ... the logged-in id's data is gone
ok: Session::extend() with the bare handler: regenerate() answered 200 with a fresh id
ok: Session::extend() with the bare handler: the fresh id has the data
ok: Session::extend() with the bare handler: early save: what was put before and after it is kept
ok: Session::extend() with the bare handler: no lock key left by any of them
ok: nothing reached PHP's error log (Laravel turns warnings into errors)
info: Laravel, Laravel's redis driver (phpredis), round 1: %d of 100 keys kept, %f s
ok: Laravel's redis driver (phpredis), round 1: every request answered 200
info: Laravel, Laravel's redis driver (phpredis), round 2: %d of 100 keys kept, %f s
ok: Laravel's redis driver (phpredis), round 2: every request answered 200
info: Laravel, Laravel's file driver, round 1: %d of 100 keys kept, %f s
ok: Laravel's file driver, round 1: every request answered 200
info: Laravel, Laravel's file driver, round 2: %d of 100 keys kept, %f s
ok: Laravel's file driver, round 2: every request answered 200
done
