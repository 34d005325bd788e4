--TEST--
Sessions (class and native): session_destroy() in a read-only request (on_lock_timeout = readonly, another request holds the lock) takes effect: the data is deleted, and the holder's later write writes nothing (quietly: a warning is an HTTP 500 to frameworks; inside session_regenerate_id() it is refused, with a warning that names the logout), so a logout cannot be undone by a request kept busy, and it is counted as session_revoked, not as a lost lease (which alerts)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $dataKey = st_data_key($sid);
    $raw->cmd('SET', $dataKey, 'user|s:5:"alice";', 'EX', 1440);
    // The request an attacker keeps busy: it holds the lock with the logged-in data.
    $busy = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 5]);
    $j = $busy->step('start', ['sid' => $sid]);
    rl_same("$form: the busy request holds the session", [true, ['user' => 'alice']], [$j['started'] ?? null, $j['data'] ?? null]);
    $busy->step('set', ['values' => ['touched' => 1]]);

    // The logout: it cannot get the lock, reads the session read-only, destroys it.
    $logout = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 0.2, 'on_lock_timeout' => 'readonly']);
    $j = $logout->step('start', ['sid' => $sid]);
    rl_same("$form: the logout request reads it read-only", [true, ['user' => 'alice']], [$j['started'] ?? null, $j['data'] ?? null]);
    rl_same("$form: ... told read-only by the handler, without a warning", [true, []], [$j['readonly'] ?? null, $j['warnings'] ?? null]);
    $j = $logout->step('destroy');
    rl_same("$form: session_destroy() returns true", true, $j['destroyed'] ?? null);
    rl_same("$form: the data is gone", 0, $raw->cmd('EXISTS', $dataKey));
    rl_same("$form: the busy request's lease was revoked (no lock left)", 0, $raw->cmd('EXISTS', st_lock_key($sid)));

    // The busy request ends and writes: nothing is written, the session stays
    // destroyed. Counted as the logout's doing, not as a lost lease (which alerts).
    $j = $busy->step('write');
    rl_same("$form: the busy request's write writes nothing, without a warning (the logout's outcome: a warning is an HTTP 500)",
        [], $j['warnings'] ?? null);
    rl_same("$form: the session is still destroyed", 0, $raw->cmd('EXISTS', $dataKey));
    $counters = $busy->step('metrics')['counters'] ?? [];
    rl_same("$form: counted as revoked, not as a lost lease", [1, 0],
        [$counters['session_revoked'] ?? null, $counters['session_lost'] ?? null]);
    $busy->finish();
    $logout->finish();

    // The busy request regenerates its id after the logout (as a login or a
    // privilege change does): refused, so the logged-in session is not carried
    // to a new id either.
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), 'user|s:5:"alice";', 'EX', 1440);
    $busy = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 5]);
    $j = $busy->step('start', ['sid' => $sid]);
    $logout = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 0.2, 'on_lock_timeout' => 'readonly']);
    $k = $logout->step('start', ['sid' => $sid]);
    rl_same("$form: another busy request, and a read-only logout", [true, true, true],
        [$j['started'] ?? null, $k['started'] ?? null, $k['readonly'] ?? null]);
    rl_same("$form: another logout", true, $logout->step('destroy')['destroyed'] ?? null);
    $j = $busy->step('regenerate');
    rl_same("$form: session_regenerate_id() after it fails", false, $j['regenerated'] ?? null);
    rl_ok("$form: ... because the logout revoked the old id's lock",
        st_has_warning(st_ours($j['warnings'] ?? []), 'another request destroyed it (a logout)'), json_encode($j['warnings'] ?? null));
    $busy->step('write');
    rl_same("$form: no session data anywhere", [], $raw->cmd('KEYS', ST_PREFIX . '*'));
    $busy->finish();
    $logout->finish();
}
echo "done\n";
?>
--EXPECT--
ok: class: the busy request holds the session
ok: class: the logout request reads it read-only
ok: class: ... told read-only by the handler, without a warning
ok: class: session_destroy() returns true
ok: class: the data is gone
ok: class: the busy request's lease was revoked (no lock left)
ok: class: the busy request's write writes nothing, without a warning (the logout's outcome: a warning is an HTTP 500)
ok: class: the session is still destroyed
ok: class: counted as revoked, not as a lost lease
ok: class: another busy request, and a read-only logout
ok: class: another logout
ok: class: session_regenerate_id() after it fails
ok: class: ... because the logout revoked the old id's lock
ok: class: no session data anywhere
ok: native: the busy request holds the session
ok: native: the logout request reads it read-only
ok: native: ... told read-only by the handler, without a warning
ok: native: session_destroy() returns true
ok: native: the data is gone
ok: native: the busy request's lease was revoked (no lock left)
ok: native: the busy request's write writes nothing, without a warning (the logout's outcome: a warning is an HTTP 500)
ok: native: the session is still destroyed
ok: native: counted as revoked, not as a lost lease
ok: native: another busy request, and a read-only logout
ok: native: another logout
ok: native: session_regenerate_id() after it fails
ok: native: ... because the logout revoked the old id's lock
ok: native: no session data anywhere
done
