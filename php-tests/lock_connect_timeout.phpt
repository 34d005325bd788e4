--TEST--
DistributedLock: a connect that never completes fails with ConnectionException after connect_timeout (DSN option, INI setting, default 1 s)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

// A listener with a backlog of 0 whose queue we fill ourselves: the kernel
// then drops further SYNs, so a connect() hangs until the client gives up.
$ctx = stream_context_create(['socket' => ['backlog' => 0]]);
$srv = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $ctx);
$name = stream_socket_get_name($srv, false);
$port = (int) substr($name, strrpos($name, ':') + 1);
$fill = [];
for ($i = 0; $i < 4; $i++) {
    $c = @stream_socket_client("tcp://127.0.0.1:$port", $en, $es, 0.2);
    if ($c === false) {
        break; // queue is full now
    }
    $fill[] = $c;
}
$probe = @stream_socket_client("tcp://127.0.0.1:$port", $en, $es, 0.2);
rl_ok('test setup: connects to the listener now hang', $probe === false);

function timed_conn_error(string $label, callable $fn, float $min, float $max): void
{
    $t = microtime(true);
    rl_throws($label, RedisLease\ConnectionException::class, $fn);
    $el = microtime(true) - $t;
    rl_ok(sprintf('%s: gave up after %.1f..%.1f s', $label, $min, $max), $el >= $min && $el <= $max, sprintf('%.3f s', $el));
}

$pw = 'TimeoutSecretPW';
timed_conn_error('DSN connect_timeout=0.5',
    fn() => (new DistributedLock('k', 5.0, "redis://:$pw@127.0.0.1:$port?connect_timeout=0.5"))->acquire(),
    0.4, 1.3);

timed_conn_error('phpredis-style DSN timeout=0.5',
    fn() => (new DistributedLock('k', 5.0, "tcp://127.0.0.1:$port?timeout=0.5"))->acquire(),
    0.4, 1.3);

// acquire($wait) must not extend the connect timeout.
timed_conn_error('DSN connect_timeout=0.5 with acquire(wait: 5)',
    fn() => (new DistributedLock('k', 5.0, "redis://127.0.0.1:$port?connect_timeout=0.5"))->acquire(5.0),
    0.4, 1.3);

// INI settings, in a child process: redis_lease.connect_timeout=0.5, then
// the default (1 s). The child uses the INI DSN ($dsn = null).
foreach ([['0.5', 0.4, 1.3], [null, 0.9, 2.0]] as [$ct, $min, $max]) {
    $ini = ['redis_lease.dsn' => "redis://127.0.0.1:$port"];
    if ($ct !== null) {
        $ini['redis_lease.connect_timeout'] = $ct;
    }
    $child = rl_spawn_php('
$t = microtime(true);
try {
    (new DistributedLock("k"))->acquire();
    echo "no exception\n";
} catch (Throwable $e) {
    echo get_class($e), "\n";
}
printf("%.3f\n", microtime(true) - $t);
', $ini);
    $label = 'INI connect_timeout=' . ($ct ?? 'default');
    rl_same("$label: ConnectionException", 'RedisLease\ConnectionException', $child->readLine(10.0));
    $el = (float) $child->readLine(10.0);
    rl_ok(sprintf('%s: gave up after %.1f..%.1f s', $label, $min, $max), $el >= $min && $el <= $max, sprintf('%.3f s', $el));
    $child->wait(5.0);
}

echo "done\n";
?>
--EXPECT--
ok: test setup: connects to the listener now hang
ok: DSN connect_timeout=0.5
ok: DSN connect_timeout=0.5: gave up after 0.4..1.3 s
ok: phpredis-style DSN timeout=0.5
ok: phpredis-style DSN timeout=0.5: gave up after 0.4..1.3 s
ok: DSN connect_timeout=0.5 with acquire(wait: 5)
ok: DSN connect_timeout=0.5 with acquire(wait: 5): gave up after 0.4..1.3 s
ok: INI connect_timeout=0.5: ConnectionException
ok: INI connect_timeout=0.5: gave up after 0.4..1.3 s
ok: INI connect_timeout=default: ConnectionException
ok: INI connect_timeout=default: gave up after 0.9..2.0 s
done
