--TEST--
Security: redis_lease's own session warnings never show more than the first 6 characters of a session id (lock wait timeout, lost lease, Redis gone during write/destroy/lazy write/abort, strict-mode check, invalid id), class and native forms
--FILE--
<?php
/*
 * Every warning path of the session handler that concerns one session is
 * triggered in a CLI child of each form. The child's warnings that start with
 * "redis_lease:" (PHP's own session warnings are not ours) must not contain
 * any 7 consecutive characters of the session id; each scenario must produce
 * at least one warning of ours, so the check is not vacuous.
 */
require __DIR__ . '/fpm-app/harness.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$doomed = rl_start_redis();       // killed while sessions are open on it
$doomedDsn = $doomed['dsn'];

// A child that starts session $sid, reports, waits for a line on stdin, then
// does $then (PHP code) and reports again with every warning it saw.
function subject(string $form, string $dsn, array $options, string $sid, string $then, array $ini = []): RlChild
{
    return st_child($form, $dsn, $options, '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s + ["warnings" => app_warning_messages()]), "\n";
fgets(STDIN);
if ($s["started"]) {
' . $then . '
}
app_reply(["status_after" => session_status()]);
', $ini + ['session.gc_maxlifetime' => '600']);
}

/** Our warnings in $list that show 7+ characters of $id in a row. */
function too_much(array $list, string $id): array
{
    $ours = array_values(array_filter($list, static fn($w) => str_contains($w, 'redis_lease:')));
    $hits = [];
    foreach ($ours as $w) {
        for ($i = 0; $i + 7 <= strlen($id); $i++) {
            if (str_contains($w, substr($id, $i, 7))) {
                $hits[] = $w;
                break;
            }
        }
    }
    return $hits;
}

$results = []; // "form: scenario" => [sid, warnings]
foreach (ST_FORMS as $form) {
    // --- lock wait runs out (fail; readonly is a configured outcome, without a warning) ---
    $sid = st_sid();
    $holder = subject($form, $dsn, [], $sid, 'session_write_close();');
    st_child_json($holder);
    $w = subject($form, $dsn, ['lock_wait' => 0.2], $sid, '');
    $a = st_child_json($w) ?? [];
    $w->send('go');
    $results["$form: lock wait runs out"] = [$sid, array_merge($a['warnings'] ?? [], (st_child_json($w) ?? [])['warnings'] ?? [])];
    $holder->send('go');
    st_child_json($holder);

    // --- a lease that ran out: the late write is refused ---
    $sid = st_sid();
    $late = subject($form, $dsn, ['lock_ttl' => 0.5, 'lock_renew' => false], $sid, '$_SESSION["late"] = 1; session_write_close();');
    $a = st_child_json($late) ?? [];
    // Await the lease's end (Redis expires the lock key), then another request takes the session.
    rl_ok("$form: the short lease ran out", rl_wait_until(static fn() => $raw->cmd('EXISTS', st_lock_key($sid)) === 0, 5.0));
    $next = subject($form, $dsn, [], $sid, 'session_write_close();');
    st_child_json($next);
    $late->send('go');
    $results["$form: write after the lease ran out"] = [$sid, array_merge($a['warnings'] ?? [], (st_child_json($late) ?? [])['warnings'] ?? [])];
    $next->send('go');
    st_child_json($next);

    // --- an id of valid characters but too long ---
    $long = str_repeat(st_sid(), 9) . 'abcd'; // 292 characters
    $c = subject($form, $dsn, [], $long, '');
    $a = st_child_json($c) ?? [];
    $c->send('go');
    $results["$form: id of 292 characters"] = [$long, array_merge($a['warnings'] ?? [], (st_child_json($c) ?? [])['warnings'] ?? [])];
}

// --- Redis goes away while sessions are open: write, destroy, lazy write, abort ---
$ops = [
    'write' => ['$_SESSION["w"] = random_int(1, 1e9); session_write_close();', []],
    'destroy' => ['session_destroy();', []],
    'lazy write (updateTimestamp)' => ['session_write_close();', ['session.lazy_write' => '1']],
    'abort (unlock)' => ['session_abort();', []],
];
$open = [];
foreach (ST_FORMS as $form) {
    foreach ($ops as $op => [$code, $ini]) {
        $sid = st_sid();
        $child = subject($form, $doomedDsn, ['lock_wait' => 0.5], $sid, $code, $ini + ['redis_lease.read_timeout' => '0.5']);
        $j = st_child_json($child) ?? [];
        rl_same("$form, $op: session open on the Redis about to go", true, $j['started'] ?? null);
        $open["$form: Redis gone before $op"] = [$sid, $child, $j['warnings'] ?? []];
    }
}
rl_stop_redis($doomed);
foreach ($open as $label => [$sid, $child, $before]) {
    $child->send('go');
    $results[$label] = [$sid, array_merge($before, (st_child_json($child) ?? [])['warnings'] ?? [])];
}
// strict mode asks Redis whether the id exists (validateId): it is gone too.
foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $c = subject($form, $doomedDsn, [], $sid, '', ['session.use_strict_mode' => '1', 'redis_lease.connect_timeout' => '0.3']);
    $a = st_child_json($c) ?? [];
    $c->send('go');
    $results["$form: strict mode, Redis gone"] = [$sid, array_merge($a['warnings'] ?? [], (st_child_json($c) ?? [])['warnings'] ?? [])];
}

$silent = [];
$leaks = [];
$noPrefix = [];
foreach ($results as $label => [$sid, $warnings]) {
    $ours = array_values(array_filter($warnings, static fn($w) => str_contains($w, 'redis_lease:')));
    if ($ours === []) {
        $silent[] = "$label: no warning of ours (all: " . json_encode($warnings) . ')';
        continue;
    }
    foreach (too_much($warnings, $sid) as $w) {
        $leaks[] = "$label: $w";
    }
    if (!str_contains($label, 'strict mode') && !str_contains(implode("\n", $ours), substr($sid, 0, 6))) {
        $noPrefix[] = "$label: " . json_encode($ours);
    }
}
rl_same('every scenario (' . count($results) . ') produced a warning of ours', [], $silent);
rl_same('no warning of ours shows 7 or more characters of the session id', [], $leaks);
rl_same('the warnings about one session name it by its first 6 characters', [], $noPrefix);
echo "done\n";
?>
--EXPECT--
ok: class: the short lease ran out
ok: native: the short lease ran out
ok: class, write: session open on the Redis about to go
ok: class, destroy: session open on the Redis about to go
ok: class, lazy write (updateTimestamp): session open on the Redis about to go
ok: class, abort (unlock): session open on the Redis about to go
ok: native, write: session open on the Redis about to go
ok: native, destroy: session open on the Redis about to go
ok: native, lazy write (updateTimestamp): session open on the Redis about to go
ok: native, abort (unlock): session open on the Redis about to go
ok: every scenario (16) produced a warning of ours
ok: no warning of ours shows 7 or more characters of the session id
ok: the warnings about one session name it by its first 6 characters
done
