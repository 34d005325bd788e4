--TEST--
Fault: a Redis that refuses BLPOP (renamed away) while a waiter queues: the lock's exception and the session's warning name the refusal, but not the wake-up key Redis echoes back (it carries the session id and the waiter's whole token)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis(['--rename-command', 'BLPOP', '']);
$dsn = $srv['dsn'];
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});

$k = rl_key('blpop');
$holder = new DistributedLock($k, 30.0, $dsn);
rl_same('lock: the holder takes it', true, $holder->acquire());
$waiter = new DistributedLock($k, 30.0, $dsn);
try {
    $waiter->acquire(2.0);
    rl_ok('lock: the waiter is refused', false, 'acquire() returned');
} catch (RedisLease\LeaseException $e) {
    $m = $e->getMessage();
    rl_ok('lock: the waiter is told Redis refused a command', stripos($m, 'unknown command') !== false, $m);
    rl_ok('... without the wake-up key or any token', !str_contains($m, ':wake:') && !preg_match('/[0-9a-f]{32}/', $m), $m);
}
$holder->release();

$sid = 'blpopsession' . bin2hex(random_bytes(8));
$a = new RedisLockingSessionHandler($dsn);
$a->open('', 'PHPSESSID');
rl_same('session: the first request reads it', '', $a->read($sid));
$b = new RedisLockingSessionHandler($dsn, ['lock_wait' => 2.0]);
$b->open('', 'PHPSESSID');
$warnings = [];
rl_same('session: the second request, left waiting, fails', false, $b->read($sid));
$said = implode("\n", $warnings);
rl_ok('session: it warns that Redis refused a command', stripos($said, 'unknown command') !== false, $said);
rl_ok('... without the session id, the wake-up key or a token', !str_contains($said, $sid) && !str_contains($said, ':wake:')
    && !preg_match('/[0-9a-f]{32}/', $said), $said);
$a->close();
echo "done\n";
?>
--EXPECT--
ok: lock: the holder takes it
ok: lock: the waiter is told Redis refused a command
ok: ... without the wake-up key or any token
ok: session: the first request reads it
ok: session: the second request, left waiting, fails
ok: session: it warns that Redis refused a command
ok: ... without the session id, the wake-up key or a token
done
