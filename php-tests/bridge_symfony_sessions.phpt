--TEST--
Bridge, Symfony sessions under php-fpm (Debian's Symfony 5.4, SessionListener and NativeSessionStorage as FrameworkBundle wires them): the seeds' race keeps 100 of 100 keys with handler_id null + session.save_handler = redis_lease and with a RedisLockingSessionHandler service (Symfony's RedisSessionHandler and NativeFileSessionHandler are run beside them and their counts printed); a rolling deploy from RedisSessionHandler shares its sessions (prefix sf_s); login (migrate(true)), logout (invalidate()) and an early save keep what they should and answer 200
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$files = sys_get_temp_dir() . '/rl-symfony-' . bin2hex(random_bytes(6));
mkdir($files);
rl_on_cleanup(static fn () => exec('rm -rf ' . escapeshellarg($files)));
// php.ini as for handler_id: null: PHP's session module with the native handler.
$pool = br_pool(['session.save_handler' => 'redis_lease', 'session.save_path' => $srv['dsn'], 'session.gc_probability' => '0']);
const N = 100;
$env = fn (string $form) => ['APP_SESSION' => $form, 'APP_LEASE_DSN' => $srv['dsn'], 'APP_REDIS_PORT' => $srv['port'], 'APP_FILES' => $files];
$dataKey = fn (string $sid) => "PHPREDIS_SESSION:$sid";
// (Less the short-lived markers of writes of sessions a request did not hold.)
$lockKeys = fn (string $sid) => rl_session_lock_keys($raw, $sid);

$pool->client()->multi(array_map(fn ($i) => br_symfony_req($env('file'), '/read'), range(1, 32)), 30.0);

/** A new session (Symfony's strict mode only accepts ids it made), with one value. */
function new_session(FpmPool $pool, array $env, string $label): string
{
    return (string) (br_json($pool, br_symfony_req($env, '/put', ['key' => 'cart', 'value' => 'apple']), "$label: new session")['id'] ?? '');
}

/** The seeds' race on an existing session: N concurrent requests, each adding its own key. */
function race(FpmPool $pool, array $env, string $sid): array
{
    $reqs = [];
    for ($i = 0; $i < N; $i++) {
        $reqs[$i] = br_symfony_req($env, '/add', ['key' => "k$i"], $sid);
    }
    $t = microtime(true);
    $rs = $pool->client()->multi($reqs, 60.0);
    $wall = microtime(true) - $t;
    $read = $pool->client()->request(br_symfony_req($env, '/read', [], $sid)['params'])->json();
    return [$rs, $wall, count($read['keys'] ?? [])];
}

$forms = ['native' => 'handler_id null + save_handler redis_lease', 'object' => 'a RedisLockingSessionHandler service'];
foreach ($forms as $form => $label) {
    for ($round = 1; $round <= 2; $round++) {
        $sid = new_session($pool, $env($form), $label);
        [$rs, $wall, $kept] = race($pool, $env($form), $sid);
        printf("info: Symfony, %s, round %d: %d of %d keys kept, %.3f s\n", $label, $round, $kept, N, $wall);
        rl_same("$label, round $round: every request answered 200 with JSON", [], br_broken($rs));
        rl_same("$label, round $round: all 100 keys kept", N, $kept);
        $before = array_map(fn ($r) => $r->json()['count_before'] ?? -1, $rs);
        sort($before);
        rl_same("$label, round $round: requests took turns (keys seen before adding = 0..99)", range(0, N - 1), $before);
        rl_same("$label, round $round: no lock key left", [], $lockKeys($sid));
    }

    // Login: migrate(true), as Symfony's security does.
    $a = new_session($pool, $env($form), $label);
    $login = br_json($pool, br_symfony_req($env($form), '/login', [], $a), "$label: login");
    $b = $login['id'] ?? '';
    rl_ok("$label: login answered 200 with a fresh id", ($login['old'] ?? '') === $a && $b !== $a && $b !== '', json_encode($login));
    $read = br_json($pool, br_symfony_req($env($form), '/read', [], $b), "$label: read after login");
    rl_same("$label: after login the new id has the data and the user", ['apple', 7], [$read['data']['cart'] ?? null, $read['data']['user'] ?? null]);
    rl_same("$label: ... the old id's data is gone", 0, $raw->cmd('EXISTS', $dataKey($a)));

    // Logout: invalidate().
    $logout = br_json($pool, br_symfony_req($env($form), '/logout', [], $b), "$label: logout");
    $c = $logout['id'] ?? '';
    rl_ok("$label: logout answered 200 with a fresh id", ($logout['old'] ?? '') === $b && $c !== $b && $c !== ''
        && ($logout['user_was'] ?? null) === 7, json_encode($logout));
    rl_same("$label: ... the logged-in id's data is gone", 0, $raw->cmd('EXISTS', $dataKey($b)));

    // Early save, then a change after it (the session opens again) and SessionListener's save.
    $d = new_session($pool, $env($form), $label);
    br_json($pool, br_symfony_req($env($form), '/early', [], $d), "$label: early save");
    $read = br_json($pool, br_symfony_req($env($form), '/read', [], $d), "$label: read after early save");
    rl_same("$label: early save: what was set before and after it is kept", [1, 2], [$read['data']['early'] ?? null, $read['data']['late'] ?? null]);
    rl_same("$label: no lock key left by any of them", [], array_merge(...array_map($lockKeys, [$a, $b, $c, $d])));
}
rl_same('nothing reached PHP\'s error log (warnings would have been exceptions)', '', $pool->phpErrors());

// Symfony's own handlers, in the same run: printed, not asserted.
foreach (['redis' => 'Symfony\'s RedisSessionHandler (phpredis)', 'file' => 'Symfony\'s NativeFileSessionHandler (flock)'] as $form => $label) {
    for ($round = 1; $round <= 2; $round++) {
        [$rs, $wall, $kept] = race($pool, $env($form), new_session($pool, $env($form), $label));
        printf("info: Symfony, %s, round %d: %d of %d keys kept, %.3f s\n", $label, $round, $kept, N, $wall);
        rl_same("$label, round $round: every request answered 200", [], br_broken($rs));
    }
}

// A rolling deploy from RedisSessionHandler: with its key prefix ("sf_s"), the handler service reads and
// writes the same keys in the same format, so requests alternating between old and new workers see
// every earlier write.
$sid = new_session($pool, $env('redis'), 'rolling deploy');
$seen = [];
for ($i = 1; $i <= 20; $i++) {
    $seen[] = br_json($pool, br_symfony_req($env($i % 2 ? 'object-sf' : 'redis'), '/add', ['key' => "k$i"], $sid), "rolling deploy, request $i")['count_before'] ?? null;
}
rl_same('rolling deploy: 20 requests alternating RedisSessionHandler and the handler with prefix sf_s each saw every earlier write',
    range(0, 19), $seen);
rl_same('... one data key, RedisSessionHandler\'s', ["sf_s$sid"], $raw->cmd('KEYS', "*$sid"));
echo "done\n";
?>
--EXPECTF--
info: Symfony, handler_id null + save_handler redis_lease, round 1: %d of 100 keys kept, %f s
ok: handler_id null + save_handler redis_lease, round 1: every request answered 200 with JSON
ok: handler_id null + save_handler redis_lease, round 1: all 100 keys kept
ok: handler_id null + save_handler redis_lease, round 1: requests took turns (keys seen before adding = 0..99)
ok: handler_id null + save_handler redis_lease, round 1: no lock key left
info: Symfony, handler_id null + save_handler redis_lease, round 2: %d of 100 keys kept, %f s
ok: handler_id null + save_handler redis_lease, round 2: every request answered 200 with JSON
ok: handler_id null + save_handler redis_lease, round 2: all 100 keys kept
ok: handler_id null + save_handler redis_lease, round 2: requests took turns (keys seen before adding = 0..99)
ok: handler_id null + save_handler redis_lease, round 2: no lock key left
ok: handler_id null + save_handler redis_lease: login answered 200 with a fresh id
ok: handler_id null + save_handler redis_lease: after login the new id has the data and the user
ok: handler_id null + save_handler redis_lease: ... the old id's data is gone
ok: handler_id null + save_handler redis_lease: logout answered 200 with a fresh id
ok: handler_id null + save_handler redis_lease: ... the logged-in id's data is gone
ok: handler_id null + save_handler redis_lease: early save: what was set before and after it is kept
ok: handler_id null + save_handler redis_lease: no lock key left by any of them
info: Symfony, a RedisLockingSessionHandler service, round 1: %d of 100 keys kept, %f s
ok: a RedisLockingSessionHandler service, round 1: every request answered 200 with JSON
ok: a RedisLockingSessionHandler service, round 1: all 100 keys kept
ok: a RedisLockingSessionHandler service, round 1: requests took turns (keys seen before adding = 0..99)
ok: a RedisLockingSessionHandler service, round 1: no lock key left
info: Symfony, a RedisLockingSessionHandler service, round 2: %d of 100 keys kept, %f s
ok: a RedisLockingSessionHandler service, round 2: every request answered 200 with JSON
ok: a RedisLockingSessionHandler service, round 2: all 100 keys kept
ok: a RedisLockingSessionHandler service, round 2: requests took turns (keys seen before adding = 0..99)
ok: a RedisLockingSessionHandler service, round 2: no lock key left
ok: a RedisLockingSessionHandler service: login answered 200 with a fresh id
ok: a RedisLockingSessionHandler service: after login the new id has the data and the user
ok: a RedisLockingSessionHandler service: ... the old id's data is gone
ok: a RedisLockingSessionHandler service: logout answered 200 with a fresh id
ok: a RedisLockingSessionHandler service: ... the logged-in id's data is gone
ok: a RedisLockingSessionHandler service: early save: what was set before and after it is kept
ok: a RedisLockingSessionHandler service: no lock key left by any of them
ok: nothing reached PHP's error log (warnings would have been exceptions)
info: Symfony, Symfony's RedisSessionHandler (phpredis), round 1: %d of 100 keys kept, %f s
ok: Symfony's RedisSessionHandler (phpredis), round 1: every request answered 200
info: Symfony, Symfony's RedisSessionHandler (phpredis), round 2: %d of 100 keys kept, %f s
ok: Symfony's RedisSessionHandler (phpredis), round 2: every request answered 200
info: Symfony, Symfony's NativeFileSessionHandler (flock), round 1: %d of 100 keys kept, %f s
ok: Symfony's NativeFileSessionHandler (flock), round 1: every request answered 200
info: Symfony, Symfony's NativeFileSessionHandler (flock), round 2: %d of 100 keys kept, %f s
ok: Symfony's NativeFileSessionHandler (flock), round 2: every request answered 200
ok: rolling deploy: 20 requests alternating RedisSessionHandler and the handler with prefix sf_s each saw every earlier write
ok: ... one data key, RedisSessionHandler's
done
