--TEST--
Redis Functions: the library is loaded once per server and every lock and session call is one FCALL; functions=0 and servers or users that cannot (FUNCTION or FCALL renamed away, an ACL without FUNCTION) run the same calls by EVALSHA, paying one refused attempt per connection; EVAL/EVALSHA renamed away leaves them working; another version's library beside ours changes nothing; each function's flags are what scripts.rs says
--INI--
session.use_cookies=0
session.cache_limiter=
session.use_strict_mode=0
session.gc_probability=0
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
// Output would count as headers sent, after which PHP keeps the first save handler.
ob_start();
const PAIRS = 20;

/** Lock pairs, a read pair, a semaphore pair and a locked session request on $dsn; true when all worked. */
function fn_work(string $dsn): bool
{
    $ok = true;
    for ($i = 0; $i < PAIRS; $i++) {
        $l = new DistributedLock(rl_key('fn'), 5.0, $dsn);
        $ok = $ok && $l->acquire() && $l->release();
    }
    $r = new DistributedLock(rl_key('fn-r'), 5.0, $dsn);
    $ok = $ok && $r->acquireRead() && $r->release();
    $s = new DistributedSemaphore(rl_key('fn-s'), 2, 5.0, $dsn);
    $ok = $ok && $s->acquire() && $s->release();
    $h = new RedisLockingSessionHandler($dsn);
    session_set_save_handler($h, false);
    session_id('fn' . bin2hex(random_bytes(4)));
    $ok = $ok && session_start();
    $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
    $ok = $ok && session_write_close();
    return $ok;
}

/** Calls of the script commands since the last reset: [fcall, evalsha + eval, function|load]. */
function fn_calls(RlRaw $raw): array
{
    $s = rl_cmdstats($raw);
    return [$s['fcall'] ?? 0, ($s['evalsha'] ?? 0) + ($s['eval'] ?? 0), $s['function|load'] ?? 0];
}

/** The libraries on the server: name => [function name => flags]. */
function fn_libraries(RlRaw $raw): array
{
    $libs = [];
    foreach ($raw->cmd('FUNCTION', 'LIST') as $lib) {
        $lib = fn_pairs($lib);
        $fns = [];
        foreach ($lib['functions'] as $f) {
            $f = fn_pairs($f);
            $fns[$f['name']] = $f['flags'];
        }
        $libs[$lib['library_name']] = $fns;
    }
    return $libs;
}

/** A RESP2 flat list of alternating keys and values as an array. */
function fn_pairs(array $flat): array
{
    $out = [];
    for ($i = 0; $i + 1 < count($flat); $i += 2) {
        $out[$flat[$i]] = $flat[$i + 1];
    }
    return $out;
}

// 1. Default: one FUNCTION LOAD, then every call is one FCALL (none by EVALSHA).
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$raw->cmd('CONFIG', 'RESETSTAT');
rl_same('functions: the work succeeds', true, fn_work($srv['dsn']));
[$fcall, $scripts, $loads] = fn_calls($raw);
rl_same('functions: the library was loaded once, nothing ran by EVALSHA or EVAL', [1, 0], [$loads, $scripts]);
// Lock pairs 2 each, read pair 2, semaphore pair 2, session open + save 2; the first call's FCALL
// found nothing and came again after the load.
rl_same('functions: one FCALL per call (plus the one that found the library missing)', 2 * PAIRS + 6 + 1, $fcall);
$libs = fn_libraries($raw);
rl_same('functions: one library, named redis_lease_<hash>', 1, count($libs));
$name = array_key_first($libs);
rl_ok('functions: its name', (bool) preg_match('/^redis_lease_([0-9a-f]{16})$/', $name, $m), $name);
$hash = $m[1] ?? '';
$flags = $libs[$name];
$want = [
    'acquire' => [], 'release' => ['allow-oom'], 'force_release' => ['allow-oom'], 'refresh' => ['allow-oom'],
    'inspect' => ['no-writes'], 'held' => ['no-writes'], 'survey' => ['no-writes'], 'fence' => [],
    'resolve' => ['allow-oom'], 'session_open' => [], 'session_save' => [], 'session_unlock' => ['allow-oom'],
    'session_revoke' => ['allow-oom'], 'session_put' => [],
];
$expected = [];
foreach ($want as $fn => $f) {
    $expected["rl_{$fn}_$hash"] = $f;
}
ksort($expected);
ksort($flags);
rl_same('functions: every script is a function named rl_<script>_<hash>, with its flags', $expected, $flags);

// 2. A restart that keeps the functions (they persist, as the script cache does not): nothing to load.
$raw->cmd('CONFIG', 'RESETSTAT');
rl_same('functions: again', true, fn_work($srv['dsn']));
rl_same('functions: loaded already: no load, no EVALSHA', [2 * PAIRS + 6, 0, 0], fn_calls($raw));

// 3. functions=0: by EVALSHA only, on a server without the library (and the shared link's next
// checkout without it goes back to functions).
$srv0 = rl_start_redis();
$raw0 = new RlRaw($srv0['port']);
rl_same('functions=0: the work succeeds', true, fn_work($srv0['dsn'] . '?functions=0'));
[$fcall, $scripts, $loads] = fn_calls($raw0);
rl_same('functions=0: no FCALL, no load, every call a script', [0, 0, true], [$fcall, $loads, $scripts >= 2 * PAIRS + 6]);
rl_same('functions=0: no library on the server', [], $raw0->cmd('FUNCTION', 'LIST'));
rl_same('functions=0: the same Redis without it then runs functions', true, fn_work($srv0['dsn']));
rl_same('functions=0: ... and loads the library', 1, count($raw0->cmd('FUNCTION', 'LIST')));

// 4. Servers and users that cannot: each falls back once per connection, then stays on EVALSHA.
$cases = [
    'FUNCTION renamed away' => [['--rename-command', 'FUNCTION', ''], null],
    'FCALL renamed away' => [['--rename-command', 'FCALL', ''], null],
    'an ACL without FUNCTION' => [[], 'ACL SETUSER default -function'],
    'an ACL without FCALL and FUNCTION' => [[], 'ACL SETUSER default -fcall -function'],
];
foreach ($cases as $label => [$args, $acl]) {
    $s = rl_start_redis($args);
    $r = new RlRaw($s['port']);
    if ($acl !== null) {
        $r->cmd(...explode(' ', $acl));
    }
    rl_same("$label: the work succeeds, by EVALSHA", true, fn_work($s['dsn']));
    $stats = rl_cmdstats($r);
    $fcall = $stats['fcall'] ?? 0;
    $scripts = ($stats['evalsha'] ?? 0) + ($stats['eval'] ?? 0);
    rl_ok("$label: at most one FCALL (the connection's first call), every call a script", $fcall <= 1 && $scripts >= 2 * PAIRS + 6, json_encode($stats));
}

// 5. EVAL and EVALSHA renamed away: everything still runs, as functions.
$s = rl_start_redis(['--rename-command', 'EVAL', '', '--rename-command', 'EVALSHA', '']);
rl_same('EVAL/EVALSHA renamed away: the work succeeds, as functions', true, fn_work($s['dsn']));

// 6. Another version's library (a rolling deploy): its functions stay, ours load beside them.
$s = rl_start_redis();
$r = new RlRaw($s['port']);
$other = "#!lua name=redis_lease_0000000000000000\n"
    . "redis.register_function('rl_acquire_0000000000000000', function(keys, args) return redis.error_reply('old version') end)\n"
    . "redis.register_function('rl_release_0000000000000000', function(keys, args) return redis.error_reply('old version') end)\n";
rl_same('another version: its library loads', 'redis_lease_0000000000000000', $r->cmd('FUNCTION', 'LOAD', $other));
rl_same('another version: ours works beside it', true, fn_work($s['dsn']));
$names = array_keys(fn_libraries($r));
sort($names);
rl_same('another version: both libraries there', ['redis_lease_0000000000000000', $name], $names);
echo "done\n";
?>
--EXPECT--
ok: functions: the work succeeds
ok: functions: the library was loaded once, nothing ran by EVALSHA or EVAL
ok: functions: one FCALL per call (plus the one that found the library missing)
ok: functions: one library, named redis_lease_<hash>
ok: functions: its name
ok: functions: every script is a function named rl_<script>_<hash>, with its flags
ok: functions: again
ok: functions: loaded already: no load, no EVALSHA
ok: functions=0: the work succeeds
ok: functions=0: no FCALL, no load, every call a script
ok: functions=0: no library on the server
ok: functions=0: the same Redis without it then runs functions
ok: functions=0: ... and loads the library
ok: FUNCTION renamed away: the work succeeds, by EVALSHA
ok: FUNCTION renamed away: at most one FCALL (the connection's first call), every call a script
ok: FCALL renamed away: the work succeeds, by EVALSHA
ok: FCALL renamed away: at most one FCALL (the connection's first call), every call a script
ok: an ACL without FUNCTION: the work succeeds, by EVALSHA
ok: an ACL without FUNCTION: at most one FCALL (the connection's first call), every call a script
ok: an ACL without FCALL and FUNCTION: the work succeeds, by EVALSHA
ok: an ACL without FCALL and FUNCTION: at most one FCALL (the connection's first call), every call a script
ok: EVAL/EVALSHA renamed away: the work succeeds, as functions
ok: another version: its library loads
ok: another version: ours works beside it
ok: another version: both libraries there
done
