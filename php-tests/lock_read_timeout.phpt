--TEST--
DistributedLock: a server that accepts but never answers -> ConnectionException after read_timeout; long waits are not cut short by read_timeout
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

// A listener that never accepts or answers: the kernel completes the TCP
// handshake into the backlog, so connect succeeds but no reply ever comes.
$bh = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
$name = stream_socket_get_name($bh, false);
$port = (int) substr($name, strrpos($name, ':') + 1);

function timed_conn_error(string $label, callable $fn, float $min, float $max): void
{
    $t = microtime(true);
    rl_throws($label, RedisLease\ConnectionException::class, $fn);
    $el = microtime(true) - $t;
    rl_ok(sprintf('%s: gave up after %.1f..%.1f s', $label, $min, $max), $el >= $min && $el <= $max, sprintf('%.3f s', $el));
}

timed_conn_error('DSN read_timeout=0.5',
    fn() => (new DistributedLock('k', 5.0, "redis://127.0.0.1:$port?read_timeout=0.5"))->acquire(),
    0.4, 1.5);
timed_conn_error('phpredis-style DSN read_timeout=0.5',
    fn() => (new DistributedLock('k', 5.0, "tcp://127.0.0.1:$port?read_timeout=0.5"))->acquire(),
    0.4, 1.5);

// The connection handshake (AUTH, SELECT, ...) must be bounded as a whole,
// not per reply: with connect_timeout 0.3 and read_timeout 0.3, a server that
// never answers must be given up on within about 0.6 s, however many setup
// commands there are.
timed_conn_error('DSN with password and db, connect_timeout=0.3, read_timeout=0.3',
    fn() => (new DistributedLock('k', 5.0, "redis://:Pw-x@127.0.0.1:$port/3?connect_timeout=0.3&read_timeout=0.3"))->acquire(),
    0.2, 1.0);

// INI redis_lease.read_timeout, in a child (DSN from INI).
$child = rl_spawn_php('
$t = microtime(true);
try {
    (new DistributedLock("k"))->acquire();
    echo "no exception\n";
} catch (Throwable $e) {
    echo get_class($e), "\n";
}
printf("%.3f\n", microtime(true) - $t);
', ['redis_lease.dsn' => "redis://127.0.0.1:$port", 'redis_lease.read_timeout' => '0.5']);
rl_same('INI read_timeout=0.5: ConnectionException', 'RedisLease\ConnectionException', $child->readLine(10.0));
$el = (float) $child->readLine(10.0);
rl_ok('INI read_timeout=0.5: gave up after 0.4..1.5 s', $el >= 0.4 && $el <= 1.5, sprintf('%.3f s', $el));
$child->wait(5.0);

// A real server and a wait longer than read_timeout: the blocking wait must
// not be cut off by read_timeout (no ConnectionException, just false).
$redis = rl_start_redis();
$dsn = $redis['dsn'] . '?read_timeout=0.3';
$k = rl_key('readto');
$holder = new DistributedLock($k, 30.0, $dsn);
$waiter = new DistributedLock($k, 30.0, $dsn);
rl_same('holder acquires', true, $holder->acquire());
$t = microtime(true);
try {
    $r = $waiter->acquire(1.2);
} catch (Throwable $e) {
    $r = get_class($e) . ': ' . $e->getMessage();
}
$el = microtime(true) - $t;
rl_same('acquire(wait: 1.2) with read_timeout 0.3 returns false', false, $r);
rl_ok('and waited the full 1.2 s (< 2 s)', $el >= 1.2 && $el < 2.0, sprintf('%.3f s', $el));
$ran = false;
try {
    $holder2 = new DistributedLock($k, 30.0, $dsn);
    $holder2->synchronized(function () use (&$ran) { $ran = true; }, 1.0);
    $r = 'no exception';
} catch (Throwable $e) {
    $r = get_class($e);
}
rl_same('synchronized(wait: 1.0) with read_timeout 0.3 -> LockTimeoutException', 'RedisLease\LockTimeoutException', $r);
rl_same('holder releases', true, $holder->release());

unset($holder, $waiter, $holder2);
echo "done\n";
?>
--EXPECT--
ok: DSN read_timeout=0.5
ok: DSN read_timeout=0.5: gave up after 0.4..1.5 s
ok: phpredis-style DSN read_timeout=0.5
ok: phpredis-style DSN read_timeout=0.5: gave up after 0.4..1.5 s
ok: DSN with password and db, connect_timeout=0.3, read_timeout=0.3
ok: DSN with password and db, connect_timeout=0.3, read_timeout=0.3: gave up after 0.2..1.0 s
ok: INI read_timeout=0.5: ConnectionException
ok: INI read_timeout=0.5: gave up after 0.4..1.5 s
ok: holder acquires
ok: acquire(wait: 1.2) with read_timeout 0.3 returns false
ok: and waited the full 1.2 s (< 2 s)
ok: synchronized(wait: 1.0) with read_timeout 0.3 -> LockTimeoutException
ok: holder releases
done
