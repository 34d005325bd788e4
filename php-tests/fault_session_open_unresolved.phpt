--TEST--
Fault: a session open whose connection fails is never reported as lock contention, and never leaves a lock or a queue place behind: a lost open is retried at once (lock_wait 0, fail and readonly modes), one whose outcome cannot be checked fails as a Redis error, and whatever it may have taken is settled by the process's next call (class and native forms)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$proxy = FaultProxy::start($srv['port']);
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=0.3');
$open = rl_script_marker('session_open.lua');

/** Our warnings of a step, joined. */
function warned(array $j): string
{
    return implode(' | ', st_ours($j['warnings'] ?? []));
}

foreach (ST_FORMS as $form) {
    foreach (['fail', 'readonly'] as $mode) {
        $c = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 0, 'on_lock_timeout' => $mode]);
        $c->step('start', ['sid' => 'warm' . st_sid()]);
        $c->step('write');

        // 1. The open never reaches Redis and the connection breaks: asked again at
        //    once on a fresh connection, it locks the session.
        $sid = st_sid();
        $raw->cmd('SET', st_data_key($sid), 'n|i:1;', 'EX', 1440);
        $proxy->arm('hold', [st_lock_key($sid), $open]);
        $j = $c->step('start', ['sid' => $sid]);
        rl_ok("$form/$mode: held open: the proxy held it", $proxy->awaitEvent('hold', 5.0) !== null);
        rl_same("$form/$mode: held open: session_start() succeeds with the data", [true, ['n' => 1]], [$j['started'] ?? null, $j['data'] ?? null]);
        rl_same("$form/$mode: held open: no warning (not read-only, not a lock timeout)", '', warned($j));
        $c->step('set', ['values' => ['n' => 2]]);
        $j = $c->step('write');
        rl_same("$form/$mode: held open: the write lands", ['n' => 2], st_decode($raw->cmd('GET', st_data_key($sid))));
        $proxy->flush(); // the held open arrives late: voided, it takes nothing
        rl_same("$form/$mode: held open: no lock left", 0, $raw->cmd('EXISTS', st_lock_key($sid)));

        // 2. As 1, and Redis is unreachable from then on: a Redis failure, not contention.
        $sid = st_sid();
        $proxy->arm('hold', [st_lock_key($sid), $open], 'down');
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: held open, then down: session_start() fails", false, $j['started'] ?? null);
        rl_ok("$form/$mode: ... naming the Redis failure, not the lock wait",
            str_contains(warned($j), 'Redis at') && !str_contains(warned($j), 'lock wait') && !str_contains(warned($j), 'read-only'),
            warned($j));
        $proxy->up();
        $proxy->flush();

        // 3. The open locks the session, its reply is lost and Redis stays unreachable:
        //    the lock (ours, unknown to the request) is freed by the next call.
        $sid = st_sid();
        $proxy->arm('cut', [st_lock_key($sid), $open], 'down');
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: cut open, then down: session_start() fails", false, $j['started'] ?? null);
        rl_ok("$form/$mode: ... Redis had locked it", ($proxy->awaitEvent('cut', 5.0)['reply'][0] ?? null) === 1);
        rl_ok("$form/$mode: ... naming the Redis failure", str_contains(warned($j), 'unknown'), warned($j));
        rl_same("$form/$mode: ... the lock is there", 1, $raw->cmd('EXISTS', st_lock_key($sid)));
        $proxy->up();
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: cut open: the next session_start() (lock_wait 0) settles it and gets the session",
            [true, ''], [$j['started'] ?? null, warned($j)]);
        $c->step('write');
        rl_same("$form/$mode: cut open: no lock left", 0, $raw->cmd('EXISTS', st_lock_key($sid)));

        // 4. The open stalls (no reply in time) and reaches Redis only later, before
        //    the process's next call: that call frees the lock the late open took.
        $sid = st_sid();
        $proxy->arm('stall', [st_lock_key($sid), $open]);
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: stalled open: session_start() fails as a timeout", [false, true],
            [$j['started'] ?? null, str_contains(warned($j), 'No reply in time')]);
        $late = $proxy->flush();
        rl_same("$form/$mode: stalled open: arriving late, it locks the session", [[1, null]], array_column($late, 'reply'));
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: stalled open: the next session_start() gets the session", [true, ''], [$j['started'] ?? null, warned($j)]);
        $c->step('write');
        rl_same("$form/$mode: stalled open: no lock left", 0, $raw->cmd('EXISTS', st_lock_key($sid)));

        // 5. As 4, but the late open arrives after the next call voided it.
        $sid = st_sid();
        $proxy->arm('stall', [st_lock_key($sid), $open]);
        $c->step('start', ['sid' => $sid]);
        $j = $c->step('start', ['sid' => $sid]);
        rl_same("$form/$mode: stalled open, voided: the next session_start() gets the session", [true, ''], [$j['started'] ?? null, warned($j)]);
        $c->step('write');
        $late = $proxy->flush();
        rl_same("$form/$mode: stalled open, voided: arriving late, it is refused ({0, -2})", [[0, -2]], array_column($late, 'reply'));
        $left = $raw->cmd('KEYS', '{' . ST_PREFIX . $sid . '}:lock*');
        rl_same("$form/$mode: stalled open, voided: no lock, no queue left, only the void marker", ['void'],
            array_map(static fn($k) => explode(':', substr($k, strlen(st_lock_key($sid)) + 1))[0], $left));
        rl_ok("$form/$mode: stalled open, voided: ... which expires",
            $left !== [] && $raw->cmd('PTTL', $left[0]) > 0);
        $c->finish();
    }
}
echo "done\n";
?>
--EXPECT--
ok: class/fail: held open: the proxy held it
ok: class/fail: held open: session_start() succeeds with the data
ok: class/fail: held open: no warning (not read-only, not a lock timeout)
ok: class/fail: held open: the write lands
ok: class/fail: held open: no lock left
ok: class/fail: held open, then down: session_start() fails
ok: class/fail: ... naming the Redis failure, not the lock wait
ok: class/fail: cut open, then down: session_start() fails
ok: class/fail: ... Redis had locked it
ok: class/fail: ... naming the Redis failure
ok: class/fail: ... the lock is there
ok: class/fail: cut open: the next session_start() (lock_wait 0) settles it and gets the session
ok: class/fail: cut open: no lock left
ok: class/fail: stalled open: session_start() fails as a timeout
ok: class/fail: stalled open: arriving late, it locks the session
ok: class/fail: stalled open: the next session_start() gets the session
ok: class/fail: stalled open: no lock left
ok: class/fail: stalled open, voided: the next session_start() gets the session
ok: class/fail: stalled open, voided: arriving late, it is refused ({0, -2})
ok: class/fail: stalled open, voided: no lock, no queue left, only the void marker
ok: class/fail: stalled open, voided: ... which expires
ok: class/readonly: held open: the proxy held it
ok: class/readonly: held open: session_start() succeeds with the data
ok: class/readonly: held open: no warning (not read-only, not a lock timeout)
ok: class/readonly: held open: the write lands
ok: class/readonly: held open: no lock left
ok: class/readonly: held open, then down: session_start() fails
ok: class/readonly: ... naming the Redis failure, not the lock wait
ok: class/readonly: cut open, then down: session_start() fails
ok: class/readonly: ... Redis had locked it
ok: class/readonly: ... naming the Redis failure
ok: class/readonly: ... the lock is there
ok: class/readonly: cut open: the next session_start() (lock_wait 0) settles it and gets the session
ok: class/readonly: cut open: no lock left
ok: class/readonly: stalled open: session_start() fails as a timeout
ok: class/readonly: stalled open: arriving late, it locks the session
ok: class/readonly: stalled open: the next session_start() gets the session
ok: class/readonly: stalled open: no lock left
ok: class/readonly: stalled open, voided: the next session_start() gets the session
ok: class/readonly: stalled open, voided: arriving late, it is refused ({0, -2})
ok: class/readonly: stalled open, voided: no lock, no queue left, only the void marker
ok: class/readonly: stalled open, voided: ... which expires
ok: native/fail: held open: the proxy held it
ok: native/fail: held open: session_start() succeeds with the data
ok: native/fail: held open: no warning (not read-only, not a lock timeout)
ok: native/fail: held open: the write lands
ok: native/fail: held open: no lock left
ok: native/fail: held open, then down: session_start() fails
ok: native/fail: ... naming the Redis failure, not the lock wait
ok: native/fail: cut open, then down: session_start() fails
ok: native/fail: ... Redis had locked it
ok: native/fail: ... naming the Redis failure
ok: native/fail: ... the lock is there
ok: native/fail: cut open: the next session_start() (lock_wait 0) settles it and gets the session
ok: native/fail: cut open: no lock left
ok: native/fail: stalled open: session_start() fails as a timeout
ok: native/fail: stalled open: arriving late, it locks the session
ok: native/fail: stalled open: the next session_start() gets the session
ok: native/fail: stalled open: no lock left
ok: native/fail: stalled open, voided: the next session_start() gets the session
ok: native/fail: stalled open, voided: arriving late, it is refused ({0, -2})
ok: native/fail: stalled open, voided: no lock, no queue left, only the void marker
ok: native/fail: stalled open, voided: ... which expires
ok: native/readonly: held open: the proxy held it
ok: native/readonly: held open: session_start() succeeds with the data
ok: native/readonly: held open: no warning (not read-only, not a lock timeout)
ok: native/readonly: held open: the write lands
ok: native/readonly: held open: no lock left
ok: native/readonly: held open, then down: session_start() fails
ok: native/readonly: ... naming the Redis failure, not the lock wait
ok: native/readonly: cut open, then down: session_start() fails
ok: native/readonly: ... Redis had locked it
ok: native/readonly: ... naming the Redis failure
ok: native/readonly: ... the lock is there
ok: native/readonly: cut open: the next session_start() (lock_wait 0) settles it and gets the session
ok: native/readonly: cut open: no lock left
ok: native/readonly: stalled open: session_start() fails as a timeout
ok: native/readonly: stalled open: arriving late, it locks the session
ok: native/readonly: stalled open: the next session_start() gets the session
ok: native/readonly: stalled open: no lock left
ok: native/readonly: stalled open, voided: the next session_start() gets the session
ok: native/readonly: stalled open, voided: arriving late, it is refused ({0, -2})
ok: native/readonly: stalled open, voided: no lock, no queue left, only the void marker
ok: native/readonly: stalled open, voided: ... which expires
done
