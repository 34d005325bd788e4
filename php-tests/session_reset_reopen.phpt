--TEST--
session_reset() (class and native forms): re-reads the stored data in the same request without waiting for its own lock, and leaves no lock behind
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// session_reset() makes ext/session call the save handler's open() and read()
// again while the session is open (php_session_initialize), without close().
foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), 'a|i:1;', 'EX', 1440);
    $c = st_child($form, $dsn, ['lock_wait' => 2], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$_SESSION["b"] = 1;              // an unsaved change, dropped by the reset
$t = microtime(true);
$r = session_reset();
$took = microtime(true) - $t;
$after = $_SESSION;
$_SESSION["c"] = 1;
$w = session_write_close();
app_reply($s + ["reset" => $r, "reset_took" => $took, "after" => $after, "write_closed" => $w]);
');
    $j = st_child_json($c, 15.0) ?? [];
    rl_same("$form: session_start()", true, $j['started'] ?? null);
    rl_same("$form: session_reset() returns true", true, $j['reset'] ?? null);
    rl_ok("$form: session_reset() does not wait for the request's own lock (< 0.5 s; lock_wait is 2 s)",
        ($j['reset_took'] ?? 9) < 0.5, sprintf('%.3f s', $j['reset_took'] ?? -1));
    rl_same("$form: \$_SESSION is the stored data again", ['a' => 1], $j['after'] ?? null);
    rl_same("$form: no warnings", [], $j['warnings'] ?? null);
    rl_same("$form: the change made after the reset is saved", ['a' => 1, 'c' => 1], st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: child exit status", 0, $c->wait(5.0));
    $left = $raw->cmd('GET', st_lock_key($sid));
    rl_same("$form: no lock left behind after the request ended", null, $left);
    if ($left !== null) {
        printf("info: %s: the leftover lock blocks the session for another %d ms\n", $form, $raw->cmd('PTTL', st_lock_key($sid)));
    }
}
echo "done\n";
?>
--EXPECT--
ok: class: session_start()
ok: class: session_reset() returns true
ok: class: session_reset() does not wait for the request's own lock (< 0.5 s; lock_wait is 2 s)
ok: class: $_SESSION is the stored data again
ok: class: no warnings
ok: class: the change made after the reset is saved
ok: class: child exit status
ok: class: no lock left behind after the request ended
ok: native: session_start()
ok: native: session_reset() returns true
ok: native: session_reset() does not wait for the request's own lock (< 0.5 s; lock_wait is 2 s)
ok: native: $_SESSION is the stored data again
ok: native: no warnings
ok: native: the change made after the reset is saved
ok: native: child exit status
ok: native: no lock left behind after the request ended
done
