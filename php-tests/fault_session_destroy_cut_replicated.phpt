--TEST--
Fault, sessions with wait_replicas: a locked destroy whose reply was cut after Redis ran it is done. The retry finds the lock and the data gone, and a write of its own on the same link, waited for, covers that on the replica: destroy() returns true without a warning (before, with wait_replicas, it was reported as a lost lease: false and a warning, which frameworks turn into HTTP 500). A destroy cut before it ran is simply run again
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

// No 5 s delay before the replica's first sync.
$srv = rl_start_redis(['--repl-diskless-sync-delay', '0']);
$raw = new RlRaw($srv['port']);
$replica = rl_start_redis(['--replicaof', '127.0.0.1', (string) $srv['port']]);
$rraw = new RlRaw($replica['port']);
rl_ok('the replica is linked', rl_wait_until(
    static fn() => str_contains((string) $rraw->cmd('INFO', 'replication'), 'master_link_status:up'), 20.0));
$proxy = FaultProxy::start($srv['port']);
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=2&wait_replicas=1&wait_timeout=2000');
$h = new RedisLockingSessionHandler($dsn);
$h->open('', 'PHPSESSID');
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});

// Warm-up through the proxy: the cut command is the script itself.
$warm = rl_key('destroy-warm');
rl_same('warm-up: read, destroy', ['', true], [$h->read($warm), $h->destroy($warm)]);

foreach (['cut' => 'ran', 'hold' => 'never ran'] as $fault => $what) {
    $sid = rl_key("destroy-$fault");
    $dataKey = "PHPREDIS_SESSION:$sid";
    $raw->cmd('SET', $dataKey, 'v|i:1;', 'EX', 1440);
    rl_same("$fault: read() takes the lock and the data", 'v|i:1;', $h->read($sid));
    $warnings = [];
    $proxy->arm($fault, [$dataKey, rl_script_marker('session_unlock.lua')]);
    $r = fault_outcome(fn() => $h->destroy($sid));
    $ev = $proxy->awaitEvent($fault, 5.0);
    rl_ok("$fault: the proxy cut the destroy's link (the destroy $what)", $ev !== null, json_encode($proxy->pendingEvents()));
    if ($fault === 'cut') {
        rl_same("$fault: Redis ran the destroy", 1, $ev['reply'] ?? null);
    }
    rl_same("$fault: destroy() is done", true, $r['value'] ?? $r['exception']);
    rl_same("$fault: without a warning", [], $warnings);
    rl_same("$fault: the data is gone from the master", 0, $raw->cmd('EXISTS', $dataKey));
    rl_same("$fault: and from the replica (the destroy was waited for)", 0, $rraw->cmd('EXISTS', $dataKey));
    rl_same("$fault: no lock left", 0, $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock"));
}
$proxy->flush();

// locking = off: a destroy (a logout, session_revoke.lua, with wait_replicas)
// whose reply was cut is sent again, and finds nothing to delete, which writes
// nothing on its link. WAIT counts the writes of its own link (on Redis 7.0, as
// measured here, it also covered what other links wrote before its last
// command; later servers do not). The script finds its marker then, and writes
// it again, which is waited for instead:
// with the replica stopped before the first DEL reached it, too few replicas,
// reported as such, never a logout said done that a failover would undo.
$off = new RedisLockingSessionHandler($proxy->dsn('connect_timeout=1&read_timeout=2&wait_replicas=1&wait_timeout=300'),
    ['locking' => 'off']);
$off->open('', 'PHPSESSID');
$sid = rl_key('destroy-off');
$dataKey = "PHPREDIS_SESSION:$sid";
$raw->cmd('SET', $dataKey, 'v|i:1;', 'EX', 1440);
// Acknowledged: the replica's acknowledged offset covers it (a WAIT of a link
// that wrote nothing then counts the replica even while it is stopped).
rl_same('off: the replica acknowledged the session', 1, $raw->cmd('WAIT', '1', '5000'));
rl_same('off: read() reads it', 'v|i:1;', $off->read($sid));
rl_kill_pid($replica['pid'], 'STOP');
$warnings = [];
$proxy->arm('cut', [$dataKey, rl_script_marker('session_revoke.lua')]);
$r = fault_outcome(fn() => $off->destroy($sid));
$ev = $proxy->awaitEvent('cut', 5.0);
rl_kill_pid($replica['pid'], 'CONT');
rl_same('off: Redis ran the cut destroy', 1, $ev['reply'] ?? null);
rl_same('off: the data is gone from the master', 0, $raw->cmd('EXISTS', $dataKey));
rl_same('off: destroy() is not said done', false, $r['value'] ?? $r['exception']);
rl_ok('off: the warning says the replicas did not acknowledge it', count($warnings) === 1
    && str_contains($warnings[0], 'wait_replicas'), json_encode($warnings));
echo "done\n";
?>
--EXPECT--
ok: the replica is linked
ok: warm-up: read, destroy
ok: cut: read() takes the lock and the data
ok: cut: the proxy cut the destroy's link (the destroy ran)
ok: cut: Redis ran the destroy
ok: cut: destroy() is done
ok: cut: without a warning
ok: cut: the data is gone from the master
ok: cut: and from the replica (the destroy was waited for)
ok: cut: no lock left
ok: hold: read() takes the lock and the data
ok: hold: the proxy cut the destroy's link (the destroy never ran)
ok: hold: destroy() is done
ok: hold: without a warning
ok: hold: the data is gone from the master
ok: hold: and from the replica (the destroy was waited for)
ok: hold: no lock left
ok: off: the replica acknowledged the session
ok: off: read() reads it
ok: off: Redis ran the cut destroy
ok: off: the data is gone from the master
ok: off: destroy() is not said done
ok: off: the warning says the replicas did not acknowledge it
done
