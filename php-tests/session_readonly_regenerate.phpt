--TEST--
Sessions (class, native, and called directly as Laravel does): a read-only request (on_lock_timeout = readonly) that moves to a fresh id (session_regenerate_id(), Laravel's migrate()) writes it only while the session it read still holds what it read: after the holder logged out (destroyed it, or saved it logged out) the fresh id stays unwritten, quietly (counted as a write conflict), so a logout is not undone under a new id; with nothing changed the fresh id is written (a login under contention works), and a worker's next request is not refused for the previous one's session, nor (the same session again) left read-only and unlocked
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$alice = 'user|s:5:"alice";';

// The holder's move: a logout that destroys the session, one that saves it
// logged out, or none (the control).
$moves = ['destroy' => 'logs out (destroy)', 'save' => 'logs out (a save)', 'none' => 'changes nothing'];
// The class form also behind a user-land proxy (as Symfony's): the fresh id's
// read is known as session_regenerate_id()'s through the proxy's frames.
foreach ([...ST_FORMS, 'proxied'] as $variant) {
    $form = $variant === 'proxied' ? 'class' : $variant;
    putenv($variant === 'proxied' ? 'RL_PROXY=1' : 'RL_PROXY');
    foreach ([false, true] as $delete) {
        foreach ($moves as $move => $says) {
            $at = "$variant, regenerate(" . var_export($delete, true) . "), the holder $says";
            $sid = st_sid();
            $raw->cmd('SET', st_data_key($sid), $alice, 'EX', 1440);
            $busy = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 5]);
            $j = $busy->step('start', ['sid' => $sid]);
            $r = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 0.2, 'on_lock_timeout' => 'readonly']);
            $k = $r->step('start', ['sid' => $sid]);
            rl_same("$at: one request holds the session, another reads it read-only",
                [true, true, ['user' => 'alice'], true],
                [$j['started'] ?? null, $k['started'] ?? null, $k['data'] ?? null, $k['readonly'] ?? null]);
            if ($move === 'destroy') {
                rl_same("$at: the logout", true, $busy->step('destroy')['destroyed'] ?? null);
            } elseif ($move === 'save') {
                $busy->step('set', ['values' => ['user' => null]]);
                rl_same("$at: the logout", true, $busy->step('write')['closed'] ?? null);
            }
            $r->step('set', ['values' => ['seen' => 1]]);
            $k = $r->step('regenerate', ['delete' => $delete]);
            $new = $k['id'] ?? '';
            rl_same("$at: session_regenerate_id() succeeds, without a warning", [true, true, []],
                [$k['regenerated'] ?? null, $new !== $sid && $new !== '', st_ours($k['warnings'] ?? [])]);
            $k = $r->step('write');
            rl_same("$at: the read-only request's save succeeds, without a warning", [true, []],
                [$k['closed'] ?? null, st_ours($k['warnings'] ?? [])]);
            $fresh = st_decode($raw->cmd('GET', st_data_key($new)));
            $counted = ($r->step('metrics')['counters'] ?? [])['session_write_conflicts'] ?? null;
            if ($move === 'none') {
                rl_same("$at: the fresh id holds what the request had", ['user' => 'alice', 'seen' => 1], $fresh);
                rl_same("$at: no conflict counted", 0, $counted);
            } else {
                rl_same("$at: the fresh id is not written (the logout stands)", null, $fresh);
                rl_same("$at: counted as a write conflict", 1, $counted);
            }
            rl_same("$at: the fresh id's lock is free", 0, $raw->cmd('EXISTS', st_lock_key($new)));
            $busy->finish();
            $r->finish();
        }
    }
}

// session_reset() reads the session again: what the request has is then the
// holder's save, and the fresh id carries that.
putenv('RL_PROXY');
foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), $alice, 'EX', 1440);
    $busy = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 5]);
    $busy->step('start', ['sid' => $sid]);
    $r = new FaultSessionChild($form, $dsn, ['lock_ttl' => 30, 'lock_wait' => 0.2, 'on_lock_timeout' => 'readonly']);
    $k = $r->step('start', ['sid' => $sid]);
    $busy->step('set', ['values' => ['cart' => 2]]);
    $j = $busy->step('write');
    rl_same("$form: read read-only, then the holder saves", [true, true], [$k['readonly'] ?? null, $j['closed'] ?? null]);
    $k = $r->step('reset');
    rl_same("$form: session_reset() reads the holder's save", [true, ['user' => 'alice', 'cart' => 2]],
        [$k['reset'] ?? null, $k['data'] ?? null]);
    $k = $r->step('regenerate', ['delete' => true]);
    $r->step('write');
    rl_same("$form: the fresh id is written with it", ['user' => 'alice', 'cart' => 2],
        st_decode($raw->cmd('GET', st_data_key($k['id'] ?? ''))));
    $busy->finish();
    $r->finish();
}

// Laravel's form: the handler called directly, the fresh id written without a read.
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$busy = new RedisLockingSessionHandler($dsn, ['lock_renew' => false]);
$r = new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.1, 'on_lock_timeout' => 'readonly']);
$busy->open('', 'laravel_session');
$r->open('', 'laravel_session');
$before = RedisLease\metrics()['session_write_conflicts'];
foreach ([false, true] as $destroy) {
    foreach ($moves as $move => $says) {
        $at = 'direct, migrate(' . var_export($destroy, true) . "), the holder $says";
        $sid = rl_key('laravel');
        $fresh = rl_key('laravel-fresh');
        $raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
        rl_same("$at: one request holds the session, another reads it read-only", [$alice, $alice, true],
            [$busy->read($sid), $r->read($sid), $r->isReadOnly()]);
        if ($move === 'destroy') {
            rl_same("$at: the logout", true, $busy->destroy($sid));
        } elseif ($move === 'save') {
            rl_same("$at: the logout", true, $busy->write($sid, 'user|N;'));
        } else {
            $busy->close();
        }
        if ($destroy) {
            rl_same("$at: the old id is destroyed", true, $r->destroy($sid));
        }
        $ok = $move === 'none';
        rl_same("$at: the fresh id " . ($ok ? 'is written' : 'is refused, quietly'),
            [$ok, $ok ? $alice . 'seen|i:1;' : null, []],
            [$r->write($fresh, $alice . 'seen|i:1;'), $raw->cmd('GET', "PHPREDIS_SESSION:$fresh"), $warnings]);
        if (!$ok) {
            // Laravel saves twice when the app saves early: dropped again.
            $r->write($fresh, $alice . 'seen|i:2;');
            rl_same("$at: written again: still nothing", [null, []], [$raw->cmd('GET', "PHPREDIS_SESSION:$fresh"), $warnings]);
        }
    }
}
rl_same('four conflicts counted (one per refused id)', 4, RedisLease\metrics()['session_write_conflicts'] - $before);

// Compressed sessions: what was read is compared in its stored form.
$lzf = ['compression' => 'lzf'];
$zbusy = new RedisLockingSessionHandler($dsn, ['lock_renew' => false] + $lzf);
$zr = new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.1, 'on_lock_timeout' => 'readonly'] + $lzf);
foreach (['none' => true, 'save' => false] as $move => $ok) {
    $sid = rl_key('lzf');
    $fresh = rl_key('lzf-fresh');
    $long = $alice . 'pad|s:200:"' . str_repeat('a', 200) . '";';
    $zbusy->read($sid);
    $zbusy->write($sid, $long);
    rl_ok("lzf, the holder {$moves[$move]}: stored compressed", $raw->cmd('GET', "PHPREDIS_SESSION:$sid") !== $long);
    rl_same("lzf, the holder {$moves[$move]}: one request holds it, another reads it read-only", [$long, $long, true],
        [$zbusy->read($sid), $zr->read($sid), $zr->isReadOnly()]);
    rl_same("lzf, the holder {$moves[$move]}: its save or close", true,
        $move === 'save' ? $zbusy->write($sid, 'user|N;') : $zbusy->close());
    rl_same("lzf, the holder {$moves[$move]}: the old id destroyed, the fresh id " . ($ok ? 'written' : 'refused'),
        [true, $ok, $ok ? $long : null],
        [$zr->destroy($sid), $zr->write($fresh, $long), $ok ? $zr->read($fresh) : $raw->cmd('GET', "PHPREDIS_SESSION:$fresh")]);
    $zr->close();
}

// A worker that keeps its handler (Octane): the next request's new session is
// written, whatever became of the session the previous request read read-only.
$sid = rl_key('worker');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session read-only', [$alice, $alice, true], [$busy->read($sid), $r->read($sid), $r->isReadOnly()]);
rl_same('... its holder logs out', true, $busy->destroy($sid));
$next = rl_key('worker-next');
rl_same("the worker's next request reads a new session", ['', false], [$r->read($next), $r->isReadOnly()]);
rl_same('... and writes it', [true, 'n|i:1;'], [$r->write($next, 'n|i:1;'), $raw->cmd('GET', "PHPREDIS_SESSION:$next")]);
// ... and the next request of the same session waits for its lock, and its
// write is kept. (Before, it read the session again unlocked, read-only still,
// and its write was dropped, answered true: review, stop 65.)
$sid = rl_key('worker-same');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session read-only; its write is dropped, quietly', [$alice, $alice, true, true],
    [$busy->read($sid), $r->read($sid), $r->isReadOnly(), $r->write($sid, 'r|i:1;')]);
rl_same('... its holder saves', [true, 'b|i:1;'], [$busy->write($sid, 'b|i:1;'), $raw->cmd('GET', "PHPREDIS_SESSION:$sid")]);
rl_same("the worker's next request of the same session holds its lock", ['b|i:1;', false, 1],
    [$r->read($sid), $r->isReadOnly(), $raw->cmd('EXISTS', st_lock_key($sid, 'PHPREDIS_SESSION:'))]);
rl_same('... and its write is kept', [true, 'c|i:1;'], [$r->write($sid, 'c|i:1;'), $raw->cmd('GET', "PHPREDIS_SESSION:$sid")]);
echo "done\n";
?>
--EXPECT--
ok: class, regenerate(false), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: class, regenerate(false), the holder logs out (destroy): the logout
ok: class, regenerate(false), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: class, regenerate(false), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: class, regenerate(false), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: class, regenerate(false), the holder logs out (destroy): counted as a write conflict
ok: class, regenerate(false), the holder logs out (destroy): the fresh id's lock is free
ok: class, regenerate(false), the holder logs out (a save): one request holds the session, another reads it read-only
ok: class, regenerate(false), the holder logs out (a save): the logout
ok: class, regenerate(false), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: class, regenerate(false), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: class, regenerate(false), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: class, regenerate(false), the holder logs out (a save): counted as a write conflict
ok: class, regenerate(false), the holder logs out (a save): the fresh id's lock is free
ok: class, regenerate(false), the holder changes nothing: one request holds the session, another reads it read-only
ok: class, regenerate(false), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: class, regenerate(false), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: class, regenerate(false), the holder changes nothing: the fresh id holds what the request had
ok: class, regenerate(false), the holder changes nothing: no conflict counted
ok: class, regenerate(false), the holder changes nothing: the fresh id's lock is free
ok: class, regenerate(true), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: class, regenerate(true), the holder logs out (destroy): the logout
ok: class, regenerate(true), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: class, regenerate(true), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: class, regenerate(true), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: class, regenerate(true), the holder logs out (destroy): counted as a write conflict
ok: class, regenerate(true), the holder logs out (destroy): the fresh id's lock is free
ok: class, regenerate(true), the holder logs out (a save): one request holds the session, another reads it read-only
ok: class, regenerate(true), the holder logs out (a save): the logout
ok: class, regenerate(true), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: class, regenerate(true), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: class, regenerate(true), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: class, regenerate(true), the holder logs out (a save): counted as a write conflict
ok: class, regenerate(true), the holder logs out (a save): the fresh id's lock is free
ok: class, regenerate(true), the holder changes nothing: one request holds the session, another reads it read-only
ok: class, regenerate(true), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: class, regenerate(true), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: class, regenerate(true), the holder changes nothing: the fresh id holds what the request had
ok: class, regenerate(true), the holder changes nothing: no conflict counted
ok: class, regenerate(true), the holder changes nothing: the fresh id's lock is free
ok: native, regenerate(false), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: native, regenerate(false), the holder logs out (destroy): the logout
ok: native, regenerate(false), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: native, regenerate(false), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: native, regenerate(false), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: native, regenerate(false), the holder logs out (destroy): counted as a write conflict
ok: native, regenerate(false), the holder logs out (destroy): the fresh id's lock is free
ok: native, regenerate(false), the holder logs out (a save): one request holds the session, another reads it read-only
ok: native, regenerate(false), the holder logs out (a save): the logout
ok: native, regenerate(false), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: native, regenerate(false), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: native, regenerate(false), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: native, regenerate(false), the holder logs out (a save): counted as a write conflict
ok: native, regenerate(false), the holder logs out (a save): the fresh id's lock is free
ok: native, regenerate(false), the holder changes nothing: one request holds the session, another reads it read-only
ok: native, regenerate(false), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: native, regenerate(false), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: native, regenerate(false), the holder changes nothing: the fresh id holds what the request had
ok: native, regenerate(false), the holder changes nothing: no conflict counted
ok: native, regenerate(false), the holder changes nothing: the fresh id's lock is free
ok: native, regenerate(true), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: native, regenerate(true), the holder logs out (destroy): the logout
ok: native, regenerate(true), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: native, regenerate(true), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: native, regenerate(true), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: native, regenerate(true), the holder logs out (destroy): counted as a write conflict
ok: native, regenerate(true), the holder logs out (destroy): the fresh id's lock is free
ok: native, regenerate(true), the holder logs out (a save): one request holds the session, another reads it read-only
ok: native, regenerate(true), the holder logs out (a save): the logout
ok: native, regenerate(true), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: native, regenerate(true), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: native, regenerate(true), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: native, regenerate(true), the holder logs out (a save): counted as a write conflict
ok: native, regenerate(true), the holder logs out (a save): the fresh id's lock is free
ok: native, regenerate(true), the holder changes nothing: one request holds the session, another reads it read-only
ok: native, regenerate(true), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: native, regenerate(true), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: native, regenerate(true), the holder changes nothing: the fresh id holds what the request had
ok: native, regenerate(true), the holder changes nothing: no conflict counted
ok: native, regenerate(true), the holder changes nothing: the fresh id's lock is free
ok: proxied, regenerate(false), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: proxied, regenerate(false), the holder logs out (destroy): the logout
ok: proxied, regenerate(false), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(false), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: proxied, regenerate(false), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: proxied, regenerate(false), the holder logs out (destroy): counted as a write conflict
ok: proxied, regenerate(false), the holder logs out (destroy): the fresh id's lock is free
ok: proxied, regenerate(false), the holder logs out (a save): one request holds the session, another reads it read-only
ok: proxied, regenerate(false), the holder logs out (a save): the logout
ok: proxied, regenerate(false), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(false), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: proxied, regenerate(false), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: proxied, regenerate(false), the holder logs out (a save): counted as a write conflict
ok: proxied, regenerate(false), the holder logs out (a save): the fresh id's lock is free
ok: proxied, regenerate(false), the holder changes nothing: one request holds the session, another reads it read-only
ok: proxied, regenerate(false), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(false), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: proxied, regenerate(false), the holder changes nothing: the fresh id holds what the request had
ok: proxied, regenerate(false), the holder changes nothing: no conflict counted
ok: proxied, regenerate(false), the holder changes nothing: the fresh id's lock is free
ok: proxied, regenerate(true), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: proxied, regenerate(true), the holder logs out (destroy): the logout
ok: proxied, regenerate(true), the holder logs out (destroy): session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(true), the holder logs out (destroy): the read-only request's save succeeds, without a warning
ok: proxied, regenerate(true), the holder logs out (destroy): the fresh id is not written (the logout stands)
ok: proxied, regenerate(true), the holder logs out (destroy): counted as a write conflict
ok: proxied, regenerate(true), the holder logs out (destroy): the fresh id's lock is free
ok: proxied, regenerate(true), the holder logs out (a save): one request holds the session, another reads it read-only
ok: proxied, regenerate(true), the holder logs out (a save): the logout
ok: proxied, regenerate(true), the holder logs out (a save): session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(true), the holder logs out (a save): the read-only request's save succeeds, without a warning
ok: proxied, regenerate(true), the holder logs out (a save): the fresh id is not written (the logout stands)
ok: proxied, regenerate(true), the holder logs out (a save): counted as a write conflict
ok: proxied, regenerate(true), the holder logs out (a save): the fresh id's lock is free
ok: proxied, regenerate(true), the holder changes nothing: one request holds the session, another reads it read-only
ok: proxied, regenerate(true), the holder changes nothing: session_regenerate_id() succeeds, without a warning
ok: proxied, regenerate(true), the holder changes nothing: the read-only request's save succeeds, without a warning
ok: proxied, regenerate(true), the holder changes nothing: the fresh id holds what the request had
ok: proxied, regenerate(true), the holder changes nothing: no conflict counted
ok: proxied, regenerate(true), the holder changes nothing: the fresh id's lock is free
ok: class: read read-only, then the holder saves
ok: class: session_reset() reads the holder's save
ok: class: the fresh id is written with it
ok: native: read read-only, then the holder saves
ok: native: session_reset() reads the holder's save
ok: native: the fresh id is written with it
ok: direct, migrate(false), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: direct, migrate(false), the holder logs out (destroy): the logout
ok: direct, migrate(false), the holder logs out (destroy): the fresh id is refused, quietly
ok: direct, migrate(false), the holder logs out (destroy): written again: still nothing
ok: direct, migrate(false), the holder logs out (a save): one request holds the session, another reads it read-only
ok: direct, migrate(false), the holder logs out (a save): the logout
ok: direct, migrate(false), the holder logs out (a save): the fresh id is refused, quietly
ok: direct, migrate(false), the holder logs out (a save): written again: still nothing
ok: direct, migrate(false), the holder changes nothing: one request holds the session, another reads it read-only
ok: direct, migrate(false), the holder changes nothing: the fresh id is written
ok: direct, migrate(true), the holder logs out (destroy): one request holds the session, another reads it read-only
ok: direct, migrate(true), the holder logs out (destroy): the logout
ok: direct, migrate(true), the holder logs out (destroy): the old id is destroyed
ok: direct, migrate(true), the holder logs out (destroy): the fresh id is refused, quietly
ok: direct, migrate(true), the holder logs out (destroy): written again: still nothing
ok: direct, migrate(true), the holder logs out (a save): one request holds the session, another reads it read-only
ok: direct, migrate(true), the holder logs out (a save): the logout
ok: direct, migrate(true), the holder logs out (a save): the old id is destroyed
ok: direct, migrate(true), the holder logs out (a save): the fresh id is refused, quietly
ok: direct, migrate(true), the holder logs out (a save): written again: still nothing
ok: direct, migrate(true), the holder changes nothing: one request holds the session, another reads it read-only
ok: direct, migrate(true), the holder changes nothing: the old id is destroyed
ok: direct, migrate(true), the holder changes nothing: the fresh id is written
ok: four conflicts counted (one per refused id)
ok: lzf, the holder changes nothing: stored compressed
ok: lzf, the holder changes nothing: one request holds it, another reads it read-only
ok: lzf, the holder changes nothing: its save or close
ok: lzf, the holder changes nothing: the old id destroyed, the fresh id written
ok: lzf, the holder logs out (a save): stored compressed
ok: lzf, the holder logs out (a save): one request holds it, another reads it read-only
ok: lzf, the holder logs out (a save): its save or close
ok: lzf, the holder logs out (a save): the old id destroyed, the fresh id refused
ok: a request reads a session read-only
ok: ... its holder logs out
ok: the worker's next request reads a new session
ok: ... and writes it
ok: a request reads a session read-only; its write is dropped, quietly
ok: ... its holder saves
ok: the worker's next request of the same session holds its lock
ok: ... and its write is kept
done
