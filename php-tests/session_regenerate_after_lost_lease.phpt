--TEST--
Sessions (class and native): session_regenerate_id(true) in a request whose lock expired (lock_ttl run out, not renewed) while another request saved the session: its destroy of the old id takes effect (a logout always does), but it is refused with a warning that says the lock expired, so the regeneration stops and what the request holds, older than what it deleted, is written under no new id (review, stop 56: the regeneration went on, and the fresh id carried the stale data)
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), 'who|s:5:"alice";', 'EX', 1440);
    // No output before session_regenerate_id() (it needs headers unsent): the
    // child says it has read by a control key, then waits for a line.
    $a = st_child($form, $dsn, ['lock_ttl' => 0.2, 'lock_renew' => false], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$_SESSION["stale"] = 1;
app_ctl()->cmd("SET", "started:' . $sid . '", json_encode($s));
fgets(STDIN); // the parent lets the lock expire and another request save
$r = session_regenerate_id(true);
app_reply(["regenerated" => $r, "after" => session_status()]);
', [], $srv['port']);
    rl_ok("$form: the request reads the session", rl_wait_until(fn() => $raw->cmd('EXISTS', "started:$sid") === 1, 10.0));
    rl_same("$form: ... with its lock", true, json_decode((string) $raw->cmd('GET', "started:$sid"), true)['started'] ?? null);
    rl_ok("$form: its lock expires", rl_wait_until(fn() => $raw->cmd('EXISTS', st_lock_key($sid)) === 0, 5.0));
    $b = st_child_json(st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$_SESSION["who"] = "bob";
app_reply($s + ["saved" => session_write_close()]);
')) ?? [];
    rl_same("$form: another request saves it", [true, []], [$b['saved'] ?? null, $b['warnings'] ?? null]);
    $a->send('go');
    $j = st_child_json($a) ?? [];
    rl_same("$form: session_regenerate_id(true) is refused", false, $j['regenerated'] ?? null);
    // Ours (PHP adds its own: "Session object destruction failed").
    $ours = array_values(array_filter($j['warnings'] ?? [], static fn($w) => str_contains($w, 'redis_lease: ')));
    rl_ok("$form: ... with the warning that the lock expired", count($ours) === 1
        && str_contains($ours[0], "lock expired (lock_ttl 0.200 s)"), json_encode($j['warnings'] ?? null));
    $a->readAll(); // its end: what PHP writes at shutdown is written
    rl_same("$form: the old id is destroyed", 0, $raw->cmd('EXISTS', st_data_key($sid)));
    $stale = array_filter($raw->cmd('KEYS', ST_PREFIX . '*'),
        static fn($k) => str_contains((string) $raw->cmd('GET', $k), 'stale'));
    rl_same("$form: no new id carries the stale data", [], array_values($stale));
}
echo "done\n";
?>
--EXPECT--
ok: class: the request reads the session
ok: class: ... with its lock
ok: class: its lock expires
ok: class: another request saves it
ok: class: session_regenerate_id(true) is refused
ok: class: ... with the warning that the lock expired
ok: class: the old id is destroyed
ok: class: no new id carries the stale data
ok: native: the request reads the session
ok: native: ... with its lock
ok: native: its lock expires
ok: native: another request saves it
ok: native: session_regenerate_id(true) is refused
ok: native: ... with the warning that the lock expired
ok: native: the old id is destroyed
ok: native: no new id carries the stale data
done
