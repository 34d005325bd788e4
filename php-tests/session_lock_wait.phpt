--TEST--
Session lock wait (class and native forms): when it runs out session_start() fails with a warning; on_lock_timeout=readonly reads and discards, quietly (a configured outcome: no warning, told by isReadOnly() and RedisLease\session_is_readonly()); a waiter is woken by the release
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

// A password-protected Redis: no message of ours may show the password.
const PW = 'Pw-s3cret-471';
const SEED = 'seed|i:1;';
const WAIT = 0.4;
$srv = rl_start_redis(['--requirepass', PW], PW);
$raw = new RlRaw($srv['port']);
$raw->cmd('AUTH', PW);
// Both DSN syntaxes with a password: the class form gets redis://, the native one phpredis's tcp://?auth=.
$dsns = [
    'class' => 'redis://:' . PW . '@127.0.0.1:' . $srv['port'],
    'native' => 'tcp://127.0.0.1:' . $srv['port'] . '?auth=' . PW,
];

/** Child code: start the session, try to add a key, save; reply with what happened. */
function waiter_code(string $sid): string
{
    return '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$data = $s["started"] ? $_SESSION : null;
$w = null;
if ($s["started"]) {
    $_SESSION["w"] = 1;
    $w = session_write_close();
}
app_reply($s + ["data" => $data, "write_closed" => $w]);
';
}

/** Our warnings must show neither the whole session id nor the password. */
function check_secrets(string $label, array $warnings, string $sid): void
{
    $ours = st_ours($warnings);
    rl_same("$label: our warnings do not show the whole session id", [], st_leaks($ours, $sid));
    rl_same("$label: our warnings do not show the password", [], st_leaks($ours, PW));
    rl_ok("$label: our warnings name the session by its first 6 characters",
        st_has_warning($ours, "'" . substr($sid, 0, 6)), json_encode($ours));
}

foreach (ST_FORMS as $form) {
    $dsn = $dsns[$form];
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $waiters = $lock . ':waiters';
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);

    // The holder: locks the session, then waits for "release" on stdin.
    $holder = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s + ["warnings" => app_warning_messages()]), "\n";
fgets(STDIN);
$_SESSION["h"] = 1;
$w = session_write_close();
echo json_encode(["write_closed" => $w, "warnings" => app_warning_messages(), "t" => microtime(true)]), "\n";
');
    $h = st_child_json($holder);
    rl_same("$form: holder started its session", true, $h['started'] ?? null);
    $lockValue = $raw->cmd('GET', $lock);
    rl_ok("$form: holder holds the lock", is_string($lockValue), rl_fmt($lockValue));

    // --- on_lock_timeout = fail (the default) ---
    $j = st_child_json(st_child($form, $dsn, ['lock_wait' => WAIT], waiter_code($sid))) ?? [];
    $label = "$form, fail";
    rl_same("$label: session_start() returns false", false, $j['started'] ?? null);
    rl_ok("$label: it waited lock_wait (0.4 s), not much longer",
        ($j['took'] ?? 0) >= WAIT - 0.02 && ($j['took'] ?? 9) < WAIT + 0.6, sprintf('%.3f s', $j['took'] ?? -1));
    $w = $j['warnings'] ?? [];
    rl_ok("$label: warning says the lock wait ran out", st_has_warning(st_ours($w), 'lock wait', 'ran out'), json_encode($w));
    rl_ok("$label: PHP adds its 'Failed to read session data' warning", st_has_warning($w, 'Failed to read session data'), json_encode($w));
    rl_same("$label: no session is active afterwards", PHP_SESSION_NONE, $j['status'] ?? null);
    check_secrets($label, $w, $sid);
    rl_same("$label: holder's lock untouched", $lockValue, $raw->cmd('GET', $lock));
    rl_same("$label: data unchanged", SEED, $raw->cmd('GET', st_data_key($sid)));
    rl_same("$label: the waiter left the waiters set", 0, $raw->cmd('ZCARD', $waiters));

    // --- on_lock_timeout = readonly ---
    $j = st_child_json(st_child($form, $dsn, ['lock_wait' => WAIT, 'on_lock_timeout' => 'readonly'], waiter_code($sid))) ?? [];
    $label = "$form, readonly";
    rl_same("$label: session_start() returns true", true, $j['started'] ?? null);
    rl_ok("$label: it waited lock_wait (0.4 s) first",
        ($j['took'] ?? 0) >= WAIT - 0.02 && ($j['took'] ?? 9) < WAIT + 0.6, sprintf('%.3f s', $j['took'] ?? -1));
    rl_same("$label: the data was read", ['seed' => 1], $j['data'] ?? null);
    // A configured outcome, not a warning (frameworks turn warnings into errors).
    rl_same("$label: no warning", [], $j['warnings'] ?? null);
    rl_same("$label: the handler says the session is read-only", true, $j['readonly'] ?? null);
    rl_same("$label: session_write_close() returns true (the write is discarded, as configured)", true, $j['write_closed'] ?? null);
    rl_same("$label: data unchanged (the write was discarded)", SEED, $raw->cmd('GET', st_data_key($sid)));
    rl_same("$label: holder's lock untouched", $lockValue, $raw->cmd('GET', $lock));

    // --- a waiter with time to spare is woken by the holder's save ---
    $waiter = st_child($form, $dsn, ['lock_wait' => 5], waiter_code($sid));
    $waiting = rl_wait_until(static fn() => $raw->cmd('ZCARD', $waiters) === 1, 5.0);
    rl_ok("$form: third request waits (is in the waiters set)", $waiting);
    $holder->send('release');
    $hr = st_child_json($holder) ?? [];
    rl_same("$form: holder saved without warnings", [], $hr['warnings'] ?? null);
    $j = st_child_json($waiter) ?? [];
    rl_same("$form: waiter got the session", true, $j['started'] ?? null);
    rl_same("$form: waiter read the holder's data", ['seed' => 1, 'h' => 1], $j['data'] ?? null);
    $handoff = ($j['t_started'] ?? INF) - ($hr['t'] ?? 0);
    rl_ok("$form: waiter locked within 0.2 s of the holder's save", $handoff < 0.2, sprintf('%.3f s', $handoff));
    printf("info: %s: handoff %.1f ms\n", $form, $handoff * 1000);
    rl_same("$form: final data", ['seed' => 1, 'h' => 1, 'w' => 1], st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lock));
    rl_same("$form: holder exit status", 0, $holder->wait(5.0));
}

// Native form with an empty session.save_path: the DSN comes from
// redis_lease.dsn. PHP's own "Failed to read session data" warning prints
// session.save_path, so this keeps the password out of every warning.
$sid = st_sid();
$raw->cmd('SET', st_lock_key($sid), str_repeat('0', 32) . ':0', 'PX', 10000); // someone else holds it
$c = st_child('native', '', ['lock_wait' => 0.2], waiter_code($sid), ['redis_lease.dsn' => $dsns['class']]);
$j = st_child_json($c) ?? [];
$w = $j['warnings'] ?? [];
rl_same('native, empty save_path: session_start() fails on the held lock', false, $j['started'] ?? null);
rl_ok('native, empty save_path: it used redis_lease.dsn (lock wait ran out)', st_has_warning(st_ours($w), 'lock wait', 'ran out'), json_encode($w));
rl_same('native, empty save_path: no warning at all shows the password', [], st_leaks($w, PW));

echo "done\n";
?>
--EXPECTF--
ok: class: holder started its session
ok: class: holder holds the lock
ok: class, fail: session_start() returns false
ok: class, fail: it waited lock_wait (0.4 s), not much longer
ok: class, fail: warning says the lock wait ran out
ok: class, fail: PHP adds its 'Failed to read session data' warning
ok: class, fail: no session is active afterwards
ok: class, fail: our warnings do not show the whole session id
ok: class, fail: our warnings do not show the password
ok: class, fail: our warnings name the session by its first 6 characters
ok: class, fail: holder's lock untouched
ok: class, fail: data unchanged
ok: class, fail: the waiter left the waiters set
ok: class, readonly: session_start() returns true
ok: class, readonly: it waited lock_wait (0.4 s) first
ok: class, readonly: the data was read
ok: class, readonly: no warning
ok: class, readonly: the handler says the session is read-only
ok: class, readonly: session_write_close() returns true (the write is discarded, as configured)
ok: class, readonly: data unchanged (the write was discarded)
ok: class, readonly: holder's lock untouched
ok: class: third request waits (is in the waiters set)
ok: class: holder saved without warnings
ok: class: waiter got the session
ok: class: waiter read the holder's data
ok: class: waiter locked within 0.2 s of the holder's save
info: class: handoff %f ms
ok: class: final data
ok: class: no lock left
ok: class: holder exit status
ok: native: holder started its session
ok: native: holder holds the lock
ok: native, fail: session_start() returns false
ok: native, fail: it waited lock_wait (0.4 s), not much longer
ok: native, fail: warning says the lock wait ran out
ok: native, fail: PHP adds its 'Failed to read session data' warning
ok: native, fail: no session is active afterwards
ok: native, fail: our warnings do not show the whole session id
ok: native, fail: our warnings do not show the password
ok: native, fail: our warnings name the session by its first 6 characters
ok: native, fail: holder's lock untouched
ok: native, fail: data unchanged
ok: native, fail: the waiter left the waiters set
ok: native, readonly: session_start() returns true
ok: native, readonly: it waited lock_wait (0.4 s) first
ok: native, readonly: the data was read
ok: native, readonly: no warning
ok: native, readonly: the handler says the session is read-only
ok: native, readonly: session_write_close() returns true (the write is discarded, as configured)
ok: native, readonly: data unchanged (the write was discarded)
ok: native, readonly: holder's lock untouched
ok: native: third request waits (is in the waiters set)
ok: native: holder saved without warnings
ok: native: waiter got the session
ok: native: waiter read the holder's data
ok: native: waiter locked within 0.2 s of the holder's save
info: native: handoff %f ms
ok: native: final data
ok: native: no lock left
ok: native: holder exit status
ok: native, empty save_path: session_start() fails on the held lock
ok: native, empty save_path: it used redis_lease.dsn (lock wait ran out)
ok: native, empty save_path: no warning at all shows the password
done
