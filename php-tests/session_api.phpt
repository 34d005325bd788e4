--TEST--
Session handler API (class and native forms): read_and_close/abort unlock, regenerate_id, destroy, strict mode, lazy_write, max_waiters, create_sid, gc, option errors, clean startup
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
// For create_sid() below; session ini cannot change once output has started.
// PHP 8.4 deprecates these two settings; they still work, and are what this tests.
error_reporting(E_ALL & ~E_DEPRECATED);
ini_set('session.sid_length', '40');
ini_set('session.sid_bits_per_character', '5');

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const SEED = 'seed|i:1;';
$so = FpmPool::extensionPath();

function seeded(RlRaw $raw, int $ttl = 1440): string
{
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', $ttl);
    return $sid;
}

/* ---------------------------------------------------------------- */
/* The class itself (in this process) */

$h = new RedisLockingSessionHandler($dsn);
rl_ok('class implements SessionHandlerInterface, SessionIdInterface, SessionUpdateTimestampHandlerInterface',
    $h instanceof SessionHandlerInterface && $h instanceof SessionIdInterface
    && $h instanceof SessionUpdateTimestampHandlerInterface);
rl_same('class is final', true, (new ReflectionClass($h))->isFinal());
rl_same('gc() returns 0', 0, $h->gc(100));
$id1 = $h->create_sid();
$id2 = $h->create_sid();
rl_ok('create_sid() follows sid_length=40, sid_bits_per_character=5 (0-9a-v)',
    preg_match('/^[0-9a-v]{40}$/', $id1) === 1, rl_fmt($id1));
rl_ok('create_sid() gives a new id each time', $id1 !== $id2);
$sid = seeded($raw);
rl_same('validateId(existing id)', true, $h->validateId($sid));
rl_same('validateId(unknown id)', false, $h->validateId(st_sid()));
// Direct calls: read locks, write saves and unlocks.
rl_same('open()', true, $h->open('', 'PHPSESSID'));
rl_same('read() returns the stored string', SEED, $h->read($sid));
rl_ok('read() took the lock', is_string($raw->cmd('GET', st_lock_key($sid))));
rl_same('write() while locked', true, $h->write($sid, 'x|i:2;'));
rl_same('write() stored the string', 'x|i:2;', $raw->cmd('GET', st_data_key($sid)));
rl_same('write() unlocked', 0, $raw->cmd('EXISTS', st_lock_key($sid)));
rl_same('read() then close(): data', 'x|i:2;', $h->read($sid));
rl_same('close()', true, $h->close());
rl_same('close() unlocked', 0, $raw->cmd('EXISTS', st_lock_key($sid)));
rl_same('read() of an unknown id is an empty string', '', $h->read($new = st_sid()));
rl_same('destroy() of the open id', true, $h->destroy($new));
rl_same('destroy() unlocked', [], st_lock_keys($raw, $new));
unset($h);

/* Options: unknown names and bad values are ValueErrors naming the option. */
foreach ([
    ['nope', 1],
    ['lock_ttl', -1],
    ['lock_wait', 'abc'],
    ['lock_wait', 1e9],
    ['on_lock_timeout', 'ignore'],
    ['locking', 'maybe'],
    // An empty string (an unset variable) does not turn locking off unseen.
    ['locking', ''],
    ['lock_renew', ' '],
    ['max_waiters', -1],
    ['prefix', 'a{b}'],
] as [$name, $value]) {
    $e = rl_throws("option $name = " . var_export($value, true) . ' is a ValueError', ValueError::class,
        static fn() => new RedisLockingSessionHandler($dsn, [$name => $value]));
    if ($e !== null) {
        rl_ok("  ... whose message names '$name'", str_contains($e->getMessage(), $name), $e->getMessage());
    }
}
$ok = new RedisLockingSessionHandler($dsn, ['locking' => false, 'lock_renew' => 0]);
rl_ok('locking and lock_renew off as false and 0', $ok instanceof RedisLockingSessionHandler);
$ok = new RedisLockingSessionHandler($dsn, ['locking' => 'off', 'lock_ttl' => 0, 'lock_wait' => 0.5,
    'on_lock_timeout' => 'readonly', 'max_waiters' => 3, 'prefix' => 'app:sess:']);
rl_ok('every option with a valid value is accepted', $ok instanceof RedisLockingSessionHandler);
unset($ok);

/* Defaults of the ini settings behind the native form. */
rl_same('ini defaults of redis_lease.session.*',
    ['1', '0', '10', 'fail', '0', 'PHPREDIS_SESSION:'],
    array_map('ini_get', ['redis_lease.session.locking', 'redis_lease.session.lock_ttl',
        'redis_lease.session.lock_wait', 'redis_lease.session.on_lock_timeout',
        'redis_lease.session.max_waiters', 'redis_lease.session.prefix']));

/* Startup: loading the extension prints nothing, even with every error shown. */
$php = escapeshellarg(getenv('TEST_PHP_EXECUTABLE') ?: PHP_BINARY);
$base = "$php -n -d extension=" . escapeshellarg($so)
    . ' -d error_reporting=-1 -d display_errors=1 -d display_startup_errors=1';
rl_same('startup with error_reporting=-1 prints nothing (no deprecations)', '',
    (string) shell_exec("$base -r '' 2>&1"));
rl_same('constructing the class prints nothing (and does not connect)', '',
    (string) shell_exec("$base -r 'new RedisLockingSessionHandler(\"redis://127.0.0.1:1\");' 2>&1"));
rl_same('session.save_handler=redis_lease is accepted at startup', 'redis_lease',
    (string) shell_exec("$base -d session.save_handler=redis_lease -r 'echo ini_get(\"session.save_handler\");' 2>&1"));
$out = (string) shell_exec("$base -d redis_lease.session.lock_ttl=-1 -r '' 2>&1");
rl_ok('a bad redis_lease.session.* ini value is reported at startup', str_contains($out, 'redis_lease.session.lock_ttl'), rl_fmt($out));

/* ---------------------------------------------------------------- */
/* Session flows, in CLI children, for both forms */

foreach (ST_FORMS as $form) {
    // --- read_and_close and session_abort() release the lock at once ---
    foreach (['read_and_close' => 'session_start(["read_and_close" => true])',
              'session_abort' => 'session_start() + session_abort()'] as $how => $desc) {
        $sid = seeded($raw);
        $a = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ', ' . ($how === 'read_and_close' ? '["read_and_close" => true]' : '[]') . ');
$data = $_SESSION;
if (' . var_export($how === 'session_abort', true) . ') { $_SESSION["lost"] = 1; session_abort(); }
app_reply($s + ["data" => $data]);
fgets(STDIN); // stay alive while the parent looks
');
        $j = st_child_json($a) ?? [];
        rl_same("$form, $how: data read", ['seed' => 1], $j['data'] ?? null);
        rl_same("$form, $how: session no longer active", PHP_SESSION_NONE, $j['status'] ?? null);
        rl_same("$form, $how: lock released while the request still runs", 0, $raw->cmd('EXISTS', st_lock_key($sid)));
        // Another request does not wait at all (lock_wait 0 would fail if it were locked).
        $b = st_child_json(st_child($form, $dsn, ['lock_wait' => 0], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
app_reply($s);
')) ?? [];
        rl_same("$form, $how: another request locks it without waiting", true, $b['started'] ?? null);
        $a->send('bye');
        rl_same("$form, $how: data unchanged", SEED, $raw->cmd('GET', st_data_key($sid)));
    }

    // --- session_regenerate_id(true) ---
    $sid = seeded($raw);
    $j = st_child_json(st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$_SESSION["x"] = 1;
$r = session_regenerate_id(true);
$new = session_id();
$w = session_write_close();
app_reply($s + ["regenerated" => $r, "new_id" => $new, "write_closed" => $w]);
')) ?? [];
    $new = (string) ($j['new_id'] ?? '');
    rl_same("$form, regenerate: session_regenerate_id(true) returns true", true, $j['regenerated'] ?? null);
    rl_ok("$form, regenerate: new id differs and has the default format", $new !== $sid && preg_match('/^[0-9a-f]{32}$/', $new) === 1, rl_fmt($new));
    rl_same("$form, regenerate: no warnings", [], $j['warnings'] ?? null);
    rl_same("$form, regenerate: old data deleted", 0, $raw->cmd('EXISTS', st_data_key($sid)));
    rl_same("$form, regenerate: new id has the data", ['seed' => 1, 'x' => 1], st_decode($raw->cmd('GET', st_data_key($new))));
    rl_same("$form, regenerate: no lock keys left for the old id", [], st_lock_keys($raw, $sid));
    rl_same("$form, regenerate: no lock keys left for the new id", [], st_lock_keys($raw, $new));

    // --- session_destroy() ---
    $sid = seeded($raw);
    $j = st_child_json(st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$d = session_destroy();
app_reply($s + ["destroyed" => $d]);
')) ?? [];
    rl_same("$form, destroy: session_destroy() returns true", true, $j['destroyed'] ?? null);
    rl_same("$form, destroy: no warnings", [], $j['warnings'] ?? null);
    rl_same("$form, destroy: data deleted", 0, $raw->cmd('EXISTS', st_data_key($sid)));
    rl_same("$form, destroy: no lock keys left", [], st_lock_keys($raw, $sid));

    // --- use_strict_mode: an unknown id is replaced, a known one kept ---
    $unknown = st_sid();
    $known = seeded($raw);
    $strictCode = '
$s = app_session_start($mode, $_SERVER["ASK_ID"]);
$_SESSION["s"] = 1;
$w = session_write_close();
app_reply($s + ["write_closed" => $w]);
';
    $strictIni = ['session.use_strict_mode' => '1', 'session.sid_length' => '40', 'session.sid_bits_per_character' => '5',
        'error_reporting' => (string) (E_ALL & ~E_DEPRECATED)];
    $j = st_child_json(st_child($form, $dsn, [], '$_SERVER["ASK_ID"] = ' . var_export($unknown, true) . ';' . $strictCode, $strictIni)) ?? [];
    $got = (string) ($j['session_id'] ?? '');
    rl_same("$form, strict: session_start() with an unknown id succeeds", true, $j['started'] ?? null);
    rl_ok("$form, strict: it got a new id from create_sid (40 chars of 0-9a-v)",
        $got !== $unknown && preg_match('/^[0-9a-v]{40}$/', $got) === 1, rl_fmt($got));
    rl_same("$form, strict: the unknown id was not created", 0, $raw->cmd('EXISTS', st_data_key($unknown)));
    rl_same("$form, strict: the unknown id got no lock keys", [], st_lock_keys($raw, $unknown));
    rl_same("$form, strict: data stored under the new id", ['s' => 1], st_decode($raw->cmd('GET', st_data_key($got))));
    $j = st_child_json(st_child($form, $dsn, [], '$_SERVER["ASK_ID"] = ' . var_export($known, true) . ';' . $strictCode, $strictIni)) ?? [];
    rl_same("$form, strict: a known id is kept", $known, $j['session_id'] ?? null);
    rl_same("$form, strict: ... and its data updated", ['seed' => 1, 's' => 1], st_decode($raw->cmd('GET', st_data_key($known))));

    // --- lazy_write: unchanged data is not rewritten, only its ttl renewed ---
    foreach (['1', '0'] as $lazy) {
        $what = "lazy_write=$lazy";
        $sid = seeded($raw, 100);
        $c = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s), "\n";
fgets(STDIN);   // the parent changes the stored data meanwhile (we hold the lock)
$w = session_write_close();
app_reply($s + ["write_closed" => $w]);
', ['session.lazy_write' => $lazy, 'session.gc_maxlifetime' => '5000']);
        $s = st_child_json($c) ?? [];
        rl_same("$form, $what: session started", true, $s['started'] ?? null);
        // A marker only a rewrite of the (unchanged) session would erase.
        $raw->cmd('SET', st_data_key($sid), 'marker|i:7;', 'KEEPTTL');
        $c->send('go');
        $j = st_child_json($c) ?? [];
        rl_same("$form, $what: saved without warnings", [], $j['warnings'] ?? null);
        $ttl = $raw->cmd('TTL', st_data_key($sid));
        rl_ok("$form, $what: ttl renewed to gc_maxlifetime (5000 s)", $ttl > 4900 && $ttl <= 5000, rl_fmt($ttl));
        rl_same("$form, $what: " . ($lazy === '1' ? 'data not rewritten (updateTimestamp)' : 'data rewritten (write)'),
            $lazy === '1' ? 'marker|i:7;' : SEED, $raw->cmd('GET', st_data_key($sid)));
        rl_same("$form, $what: lock released", 0, $raw->cmd('EXISTS', st_lock_key($sid)));
    }

    // --- max_waiters: beyond the cap, session_start() fails at once ---
    $sid = seeded($raw);
    $waiters = st_lock_key($sid) . ':waiters';
    $holder = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s), "\n";
fgets(STDIN);
session_write_close();
');
    rl_same("$form, max_waiters: holder started", true, (st_child_json($holder) ?? [])['started'] ?? null);
    $capped = ['max_waiters' => 1, 'lock_wait' => 5];
    $waitCode = '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
app_reply($s);
';
    $w1 = st_child($form, $dsn, $capped, $waitCode);
    rl_ok("$form, max_waiters: first waiter is waiting",
        rl_wait_until(static fn() => $raw->cmd('ZCARD', $waiters) === 1, 5.0), rl_fmt($raw->cmd('ZCARD', $waiters)));
    $j = st_child_json(st_child($form, $dsn, $capped, $waitCode)) ?? [];
    rl_same("$form, max_waiters: second waiter's session_start() returns false", false, $j['started'] ?? null);
    rl_ok("$form, max_waiters: ... at once (< 0.5 s, not after lock_wait)", ($j['took'] ?? 9) < 0.5, sprintf('%.3f s', $j['took'] ?? -1));
    rl_ok("$form, max_waiters: ... with a warning naming max_waiters", st_has_warning(st_ours($j['warnings'] ?? []), 'max_waiters'),
        json_encode($j['warnings'] ?? null));
    rl_same("$form, max_waiters: ... whose warnings do not show the session id", [], st_leaks($j['warnings'] ?? [], $sid));
    rl_same("$form, max_waiters: still one waiter", 1, $raw->cmd('ZCARD', $waiters));
    $holder->send('release');
    $j = st_child_json($w1) ?? [];
    rl_same("$form, max_waiters: first waiter gets the session after the release", true, $j['started'] ?? null);

    // --- lock_ttl 0 (the default): 10 s when renewed (lock_renew, the default), else
    // max_execution_time, or 30 s when that is 0 ---
    foreach ([['0', '1', 10000], ['7', '1', 10000], ['0', '0', 30000], ['7', '0', 7000]] as [$met, $renew, $want]) {
        $sid = seeded($raw);
        $opts = ['lock_ttl' => 0] + ($renew === '0' ? ['lock_renew' => false] : []);
        $c = st_child($form, $dsn, $opts, '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s), "\n";
fgets(STDIN);
', ['max_execution_time' => (string) $met]);
        rl_same("$form, lock_ttl auto, lock_renew=$renew, max_execution_time=$met: started", true, (st_child_json($c) ?? [])['started'] ?? null);
        $pttl = $raw->cmd('PTTL', st_lock_key($sid));
        rl_ok("$form, lock_ttl auto, lock_renew=$renew, max_execution_time=$met: lock lease is " . ($want / 1000) . ' s',
            $pttl > $want - 1000 && $pttl <= $want, rl_fmt($pttl));
        $c->send('bye');
        rl_same("$form, lock_ttl auto, lock_renew=$renew, max_execution_time=$met: unlocked at exit", 0, $c->wait(5.0) + $raw->cmd('EXISTS', st_lock_key($sid)));
    }

    // --- session_gc() and a session id made by the handler ---
    $j = st_child_json(st_child($form, $dsn, [], '
$s = app_session_start($mode, "");
$gc = session_gc();
$_SESSION["n"] = 1;
$w = session_write_close();
app_reply($s + ["gc" => $gc, "write_closed" => $w]);
', ['session.sid_length' => '48', 'session.sid_bits_per_character' => '6', 'error_reporting' => (string) (E_ALL & ~E_DEPRECATED)])) ?? [];
    rl_same("$form: session_gc() returns 0", 0, $j['gc'] ?? null);
    $id = (string) ($j['session_id'] ?? '');
    rl_ok("$form: new session id follows sid_length=48, sid_bits_per_character=6",
        preg_match('/^[0-9a-zA-Z,-]{48}$/', $id) === 1, rl_fmt($id));
    rl_same("$form: ... and its data is stored", ['n' => 1], st_decode($raw->cmd('GET', st_data_key($id))));
}

/* A bad option in the native form: session_start() fails with a warning naming the setting. */
$c = st_child('native', $dsn, ['lock_ttl' => -1], '
$s = app_session_start($mode, "");
app_reply($s);
');
$out = $c->readAll(10.0);
$lines = explode("\n", trim($out));
$j = json_decode((string) end($lines), true) ?? [];
rl_same('native, bad ini option: session_start() returns false', false, $j['started'] ?? null);
rl_ok('native, bad ini option: warning names redis_lease.session.lock_ttl',
    st_has_warning(st_ours($j['warnings'] ?? []), 'redis_lease.session.lock_ttl'), json_encode($j['warnings'] ?? null));
rl_ok('native, bad ini option: also reported at startup', str_contains($out, 'PHP Startup') && str_contains($out, 'lock_ttl'), rl_fmt($out));

echo "done\n";
?>
--EXPECT--
ok: class implements SessionHandlerInterface, SessionIdInterface, SessionUpdateTimestampHandlerInterface
ok: class is final
ok: gc() returns 0
ok: create_sid() follows sid_length=40, sid_bits_per_character=5 (0-9a-v)
ok: create_sid() gives a new id each time
ok: validateId(existing id)
ok: validateId(unknown id)
ok: open()
ok: read() returns the stored string
ok: read() took the lock
ok: write() while locked
ok: write() stored the string
ok: write() unlocked
ok: read() then close(): data
ok: close()
ok: close() unlocked
ok: read() of an unknown id is an empty string
ok: destroy() of the open id
ok: destroy() unlocked
ok: option nope = 1 is a ValueError
ok:   ... whose message names 'nope'
ok: option lock_ttl = -1 is a ValueError
ok:   ... whose message names 'lock_ttl'
ok: option lock_wait = 'abc' is a ValueError
ok:   ... whose message names 'lock_wait'
ok: option lock_wait = 1000000000.0 is a ValueError
ok:   ... whose message names 'lock_wait'
ok: option on_lock_timeout = 'ignore' is a ValueError
ok:   ... whose message names 'on_lock_timeout'
ok: option locking = 'maybe' is a ValueError
ok:   ... whose message names 'locking'
ok: option locking = '' is a ValueError
ok:   ... whose message names 'locking'
ok: option lock_renew = ' ' is a ValueError
ok:   ... whose message names 'lock_renew'
ok: option max_waiters = -1 is a ValueError
ok:   ... whose message names 'max_waiters'
ok: option prefix = 'a{b}' is a ValueError
ok:   ... whose message names 'prefix'
ok: locking and lock_renew off as false and 0
ok: every option with a valid value is accepted
ok: ini defaults of redis_lease.session.*
ok: startup with error_reporting=-1 prints nothing (no deprecations)
ok: constructing the class prints nothing (and does not connect)
ok: session.save_handler=redis_lease is accepted at startup
ok: a bad redis_lease.session.* ini value is reported at startup
ok: class, read_and_close: data read
ok: class, read_and_close: session no longer active
ok: class, read_and_close: lock released while the request still runs
ok: class, read_and_close: another request locks it without waiting
ok: class, read_and_close: data unchanged
ok: class, session_abort: data read
ok: class, session_abort: session no longer active
ok: class, session_abort: lock released while the request still runs
ok: class, session_abort: another request locks it without waiting
ok: class, session_abort: data unchanged
ok: class, regenerate: session_regenerate_id(true) returns true
ok: class, regenerate: new id differs and has the default format
ok: class, regenerate: no warnings
ok: class, regenerate: old data deleted
ok: class, regenerate: new id has the data
ok: class, regenerate: no lock keys left for the old id
ok: class, regenerate: no lock keys left for the new id
ok: class, destroy: session_destroy() returns true
ok: class, destroy: no warnings
ok: class, destroy: data deleted
ok: class, destroy: no lock keys left
ok: class, strict: session_start() with an unknown id succeeds
ok: class, strict: it got a new id from create_sid (40 chars of 0-9a-v)
ok: class, strict: the unknown id was not created
ok: class, strict: the unknown id got no lock keys
ok: class, strict: data stored under the new id
ok: class, strict: a known id is kept
ok: class, strict: ... and its data updated
ok: class, lazy_write=1: session started
ok: class, lazy_write=1: saved without warnings
ok: class, lazy_write=1: ttl renewed to gc_maxlifetime (5000 s)
ok: class, lazy_write=1: data not rewritten (updateTimestamp)
ok: class, lazy_write=1: lock released
ok: class, lazy_write=0: session started
ok: class, lazy_write=0: saved without warnings
ok: class, lazy_write=0: ttl renewed to gc_maxlifetime (5000 s)
ok: class, lazy_write=0: data rewritten (write)
ok: class, lazy_write=0: lock released
ok: class, max_waiters: holder started
ok: class, max_waiters: first waiter is waiting
ok: class, max_waiters: second waiter's session_start() returns false
ok: class, max_waiters: ... at once (< 0.5 s, not after lock_wait)
ok: class, max_waiters: ... with a warning naming max_waiters
ok: class, max_waiters: ... whose warnings do not show the session id
ok: class, max_waiters: still one waiter
ok: class, max_waiters: first waiter gets the session after the release
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=0: started
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=0: lock lease is 10 s
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=0: unlocked at exit
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=7: started
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=7: lock lease is 10 s
ok: class, lock_ttl auto, lock_renew=1, max_execution_time=7: unlocked at exit
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=0: started
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=0: lock lease is 30 s
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=0: unlocked at exit
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=7: started
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=7: lock lease is 7 s
ok: class, lock_ttl auto, lock_renew=0, max_execution_time=7: unlocked at exit
ok: class: session_gc() returns 0
ok: class: new session id follows sid_length=48, sid_bits_per_character=6
ok: class: ... and its data is stored
ok: native, read_and_close: data read
ok: native, read_and_close: session no longer active
ok: native, read_and_close: lock released while the request still runs
ok: native, read_and_close: another request locks it without waiting
ok: native, read_and_close: data unchanged
ok: native, session_abort: data read
ok: native, session_abort: session no longer active
ok: native, session_abort: lock released while the request still runs
ok: native, session_abort: another request locks it without waiting
ok: native, session_abort: data unchanged
ok: native, regenerate: session_regenerate_id(true) returns true
ok: native, regenerate: new id differs and has the default format
ok: native, regenerate: no warnings
ok: native, regenerate: old data deleted
ok: native, regenerate: new id has the data
ok: native, regenerate: no lock keys left for the old id
ok: native, regenerate: no lock keys left for the new id
ok: native, destroy: session_destroy() returns true
ok: native, destroy: no warnings
ok: native, destroy: data deleted
ok: native, destroy: no lock keys left
ok: native, strict: session_start() with an unknown id succeeds
ok: native, strict: it got a new id from create_sid (40 chars of 0-9a-v)
ok: native, strict: the unknown id was not created
ok: native, strict: the unknown id got no lock keys
ok: native, strict: data stored under the new id
ok: native, strict: a known id is kept
ok: native, strict: ... and its data updated
ok: native, lazy_write=1: session started
ok: native, lazy_write=1: saved without warnings
ok: native, lazy_write=1: ttl renewed to gc_maxlifetime (5000 s)
ok: native, lazy_write=1: data not rewritten (updateTimestamp)
ok: native, lazy_write=1: lock released
ok: native, lazy_write=0: session started
ok: native, lazy_write=0: saved without warnings
ok: native, lazy_write=0: ttl renewed to gc_maxlifetime (5000 s)
ok: native, lazy_write=0: data rewritten (write)
ok: native, lazy_write=0: lock released
ok: native, max_waiters: holder started
ok: native, max_waiters: first waiter is waiting
ok: native, max_waiters: second waiter's session_start() returns false
ok: native, max_waiters: ... at once (< 0.5 s, not after lock_wait)
ok: native, max_waiters: ... with a warning naming max_waiters
ok: native, max_waiters: ... whose warnings do not show the session id
ok: native, max_waiters: still one waiter
ok: native, max_waiters: first waiter gets the session after the release
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=0: started
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=0: lock lease is 10 s
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=0: unlocked at exit
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=7: started
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=7: lock lease is 10 s
ok: native, lock_ttl auto, lock_renew=1, max_execution_time=7: unlocked at exit
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=0: started
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=0: lock lease is 30 s
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=0: unlocked at exit
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=7: started
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=7: lock lease is 7 s
ok: native, lock_ttl auto, lock_renew=0, max_execution_time=7: unlocked at exit
ok: native: session_gc() returns 0
ok: native: new session id follows sid_length=48, sid_bits_per_character=6
ok: native: ... and its data is stored
ok: native, bad ini option: session_start() returns false
ok: native, bad ini option: warning names redis_lease.session.lock_ttl
ok: native, bad ini option: also reported at startup
done
