--TEST--
Sessions called directly, as Laravel's migrate(true) does: a locked destroy after this request's lease ran out goes on as a logout (a revocation), and what the request holds is not written under a fresh id. When that logout fails (Redis unreachable), destroy() says so, and the fresh id is refused all the same, with the lock-expired warning (review, stop 57: before, the failed logout forgot the lost lease, and the request's old data was written under the fresh id)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$proxy = FaultProxy::start($srv['port']);
$dsn = $proxy->dsn('connect_timeout=0.5&read_timeout=0.5');
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
// Not renewed: the lease runs out while the request works.
$h = new RedisLockingSessionHandler($dsn, ['lock_ttl' => 0.5, 'lock_renew' => false]);
$h->open('', 'PHPSESSID');
$sid = rl_key('lost-destroy');
$dataKey = "PHPREDIS_SESSION:$sid";
$raw->cmd('SET', $dataKey, 'user|s:5:"alice";', 'EX', 1440);
rl_same('the request reads the session, locked', 'user|s:5:"alice";', $h->read($sid));
rl_ok('its lease runs out', rl_wait_until(
    static fn() => $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock") === 0, 5.0));
// The logout that follows is held, and Redis becomes unreachable.
$proxy->arm('hold', [rl_script_marker('session_revoke.lua')], 'down');
$r = fault_outcome(fn() => $h->destroy($sid));
rl_ok('the logout was sent and held', $proxy->awaitEvent('hold', 5.0) !== null);
rl_same('destroy() fails', false, $r['value'] ?? $r['exception']);
rl_ok('... with a warning', count($warnings) === 1 && str_contains($warnings[0], 'was not destroyed'),
    json_encode($warnings));
$proxy->disarm();
$proxy->up();
$warnings = [];
$fresh = rl_key('lost-destroy-fresh');
rl_same('the fresh id is refused', false, $h->write($fresh, 'user|s:5:"alice";t|i:2;'));
rl_ok('... with the lock-expired warning', count($warnings) === 1 && str_contains($warnings[0], 'expired'),
    json_encode($warnings));
rl_same('... and nothing was written under it', 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh"));
$h->close();
echo "done\n";
?>
--EXPECT--
ok: the request reads the session, locked
ok: its lease runs out
ok: the logout was sent and held
ok: destroy() fails
ok: ... with a warning
ok: the fresh id is refused
ok: ... with the lock-expired warning
ok: ... and nothing was written under it
done
