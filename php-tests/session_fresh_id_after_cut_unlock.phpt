--TEST--
Fault: a session called directly (Laravel's migrate(): a fresh id written without a read) whose old id's unlock reached Redis but lost its reply: the unlock asked again finds the lock free, which is the first run's doing, not an expired lock, so the fresh id is written without a warning (review, stop 51: before, the request was told its lock expired and the fresh id was refused)
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
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=1');
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$handler = new RedisLockingSessionHandler($dsn);
$handler->open('', 'laravel_session');
$alice = 'user|s:5:"alice";';
// Warm-up: every script loaded, so the cut command is the script itself.
$warm = rl_key('warm');
rl_same('warm-up: read, write', ['', true], [$handler->read($warm), $handler->write($warm, $alice)]);
rl_same('warm-up: read, unlock', [$alice, true], [$handler->read($warm), $handler->close()]);

$sid = rl_key('cut-unlock');
$fresh = rl_key('cut-unlock-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session', $alice, $handler->read($sid));
// (session_save.lua's unlock runs as the session_unlock function.)
$proxy->arm('cut', ["{PHPREDIS_SESSION:$sid}:lock", rl_script_marker('session_unlock.lua')]);
$before = RedisLease\metrics();
$warnings = [];
$written = $handler->write($fresh, $alice);
$ev = $proxy->awaitEvent('cut', 5.0);
rl_same("the old id's unlock ran, its reply cut", 1, $ev['reply'] ?? null);
rl_same('the fresh id is written, without a warning', [true, []], [$written, $warnings]);
rl_same('... and stored', $alice, $raw->cmd('GET', "PHPREDIS_SESSION:$fresh"));
rl_same('the old id is unlocked', 0, $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock"));
$after = RedisLease\metrics();
rl_same('no lost lease counted', 0, $after['session_lost'] - $before['session_lost']);
$handler->close();
echo "done\n";
?>
--EXPECT--
ok: warm-up: read, write
ok: warm-up: read, unlock
ok: a request reads a session
ok: the old id's unlock ran, its reply cut
ok: the fresh id is written, without a warning
ok: ... and stored
ok: the old id is unlocked
ok: no lost lease counted
done
