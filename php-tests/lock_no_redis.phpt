--TEST--
DistributedLock: Redis not running -> RedisLease\ConnectionException quickly (never false), without the password in the message
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

// A port nobody listens on (found free, then released).
$port = rl_free_port();
$pw = 'Sup3rSecretPW';

function check_conn_error(string $label, callable $fn, string $pw): void
{
    $t = microtime(true);
    $e = rl_throws($label, RedisLease\ConnectionException::class, $fn);
    $el = microtime(true) - $t;
    rl_ok("$label: failed fast (< 1.5 s with connection refused)", $el < 1.5, sprintf('%.3f s', $el));
    if ($e !== null) {
        rl_ok("$label: is a LeaseException", $e instanceof RedisLease\LeaseException);
        rl_ok("$label: message is not empty", $e->getMessage() !== '');
        // The message of the exception and of any previous ones. (Not the
        // stack trace: PHP itself puts caller arguments there.)
        $msgs = [];
        for ($x = $e; $x !== null; $x = $x->getPrevious()) {
            $msgs[] = $x->getMessage();
        }
        rl_ok("$label: password not in message", !str_contains(implode("\n", $msgs), $pw), implode(' / ', $msgs));
    }
}

$before = RedisLease\metrics();
$dsn = "redis://:$pw@127.0.0.1:$port";
// Whether the constructor connects eagerly or lazily, the first call that
// needs Redis must throw ConnectionException.
check_conn_error('acquire()', fn() => (new DistributedLock('k', 5.0, $dsn))->acquire(), $pw);
check_conn_error('acquire(wait: 2)', fn() => (new DistributedLock('k', 5.0, $dsn))->acquire(2.0), $pw);
$ran = false;
check_conn_error('synchronized()', function () use ($dsn, &$ran) {
    return (new DistributedLock('k', 5.0, $dsn))->synchronized(function () use (&$ran) { $ran = true; }, 1.0);
}, $pw);
rl_same('synchronized(): callback did not run', false, $ran);

$dsn2 = "tcp://127.0.0.1:$port?auth=$pw&database=1";
check_conn_error('phpredis-style DSN acquire()', fn() => (new DistributedLock('k', 5.0, $dsn2))->acquire(), $pw);
check_conn_error('user:password DSN acquire()', fn() => (new DistributedLock('k', 5.0, "redis://app:$pw@127.0.0.1:$port/2"))->acquire(), $pw);

$after = RedisLease\metrics();
rl_ok('metrics: connection_errors increased', ($after['connection_errors'] ?? 0) > ($before['connection_errors'] ?? 0),
    json_encode([$before['connection_errors'] ?? null, $after['connection_errors'] ?? null]));
rl_same('metrics: nothing counted as acquired', $before['lock_acquired'] ?? null, $after['lock_acquired'] ?? null);
echo "done\n";
?>
--EXPECT--
ok: acquire()
ok: acquire(): failed fast (< 1.5 s with connection refused)
ok: acquire(): is a LeaseException
ok: acquire(): message is not empty
ok: acquire(): password not in message
ok: acquire(wait: 2)
ok: acquire(wait: 2): failed fast (< 1.5 s with connection refused)
ok: acquire(wait: 2): is a LeaseException
ok: acquire(wait: 2): message is not empty
ok: acquire(wait: 2): password not in message
ok: synchronized()
ok: synchronized(): failed fast (< 1.5 s with connection refused)
ok: synchronized(): is a LeaseException
ok: synchronized(): message is not empty
ok: synchronized(): password not in message
ok: synchronized(): callback did not run
ok: phpredis-style DSN acquire()
ok: phpredis-style DSN acquire(): failed fast (< 1.5 s with connection refused)
ok: phpredis-style DSN acquire(): is a LeaseException
ok: phpredis-style DSN acquire(): message is not empty
ok: phpredis-style DSN acquire(): password not in message
ok: user:password DSN acquire()
ok: user:password DSN acquire(): failed fast (< 1.5 s with connection refused)
ok: user:password DSN acquire(): is a LeaseException
ok: user:password DSN acquire(): message is not empty
ok: user:password DSN acquire(): password not in message
ok: metrics: connection_errors increased
ok: metrics: nothing counted as acquired
done
