--TEST--
DistributedLock DSNs: redis:// with password / ACL user / db / options, phpredis-style tcp://, unix://; auth failures are ConnectionExceptions without the password
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

// Server 1: TCP with a password and an ACL user.
$pw = 'Srv-Pass-4711';
$s1 = rl_start_redis(['--requirepass', $pw], $pw);
$raw1 = new RlRaw($s1['port']);
$raw1->cmd('AUTH', $pw);
$raw1->cmd('ACL', 'SETUSER', 'app', 'on', '>App-Pass-0815', '~*', '&*', '+@all');
$p1 = $s1['port'];

// Server 2: no password, also listening on a unix socket.
$sock = rl_tempfile('.sock');
@unlink($sock);
$s2 = rl_start_redis(['--unixsocket', $sock, '--unixsocketperm', '700']);
$raw2 = new RlRaw($s2['port']);
$p2 = $s2['port'];

/** Acquire through $dsn and check the lock key landed in database $db of $raw. */
function check_dsn(string $label, string $dsn, RlRaw $raw, int $db): void
{
    $k = rl_key('dsn');
    try {
        $l = new DistributedLock($k, 5.0, $dsn);
        $got = $l->acquire();
    } catch (Throwable $e) {
        $got = get_class($e) . ': ' . $e->getMessage();
    }
    rl_same("$label: acquire", true, $got);
    $raw->cmd('SELECT', $db);
    $in = $raw->cmd('EXISTS', rl_lock_key($k));
    $raw->cmd('SELECT', 0);
    rl_same("$label: lock key is in db $db", 1, $in);
    if ($got === true) {
        rl_same("$label: release", true, $l->release());
    }
}

check_dsn('redis:// with password, db 3', "redis://:$pw@127.0.0.1:$p1/3", $raw1, 3);
check_dsn('redis:// with ACL user and password, db 4', "redis://app:App-Pass-0815@127.0.0.1:$p1/4", $raw1, 4);
check_dsn('tcp:// phpredis style with auth, database 5, timeouts', "tcp://127.0.0.1:$p1?auth=$pw&database=5&timeout=1.5&read_timeout=2", $raw1, 5);
check_dsn('redis:// no db means db 0', "redis://127.0.0.1:$p2", $raw2, 0);
check_dsn('redis:// with timeouts in the query', "redis://127.0.0.1:$p2/1?connect_timeout=0.5&read_timeout=1.5", $raw2, 1);
check_dsn('unix:// socket', "unix://$sock", $raw2, 0);
check_dsn('unix:// socket with database=6', "unix://$sock?database=6", $raw2, 6);

// Authentication failures: ConnectionException, password never echoed.
foreach ([
    'wrong password' => ["redis://:Wrong-Pass-999@127.0.0.1:$p1", 'Wrong-Pass-999'],
    'wrong ACL password' => ["redis://app:Wrong-Acl-888@127.0.0.1:$p1", 'Wrong-Acl-888'],
    'phpredis-style wrong auth' => ["tcp://127.0.0.1:$p1?auth=Wrong-Tcp-777", 'Wrong-Tcp-777'],
    'no password for a protected server' => ["redis://127.0.0.1:$p1", $pw],
] as $label => [$dsn, $secret]) {
    $e = rl_throws("$label: ConnectionException", RedisLease\ConnectionException::class,
        fn() => (new DistributedLock('k', 5.0, $dsn))->acquire());
    if ($e !== null) {
        rl_ok("$label: password not in message", !str_contains($e->getMessage(), $secret), $e->getMessage());
    }
}

// A database index Redis rejects is an error reply: ConnectionException.
rl_throws('db 99 (beyond the 16 databases)', RedisLease\ConnectionException::class,
    fn() => (new DistributedLock('k', 5.0, "redis://127.0.0.1:$p2/99"))->acquire());

echo "done\n";
?>
--EXPECT--
ok: redis:// with password, db 3: acquire
ok: redis:// with password, db 3: lock key is in db 3
ok: redis:// with password, db 3: release
ok: redis:// with ACL user and password, db 4: acquire
ok: redis:// with ACL user and password, db 4: lock key is in db 4
ok: redis:// with ACL user and password, db 4: release
ok: tcp:// phpredis style with auth, database 5, timeouts: acquire
ok: tcp:// phpredis style with auth, database 5, timeouts: lock key is in db 5
ok: tcp:// phpredis style with auth, database 5, timeouts: release
ok: redis:// no db means db 0: acquire
ok: redis:// no db means db 0: lock key is in db 0
ok: redis:// no db means db 0: release
ok: redis:// with timeouts in the query: acquire
ok: redis:// with timeouts in the query: lock key is in db 1
ok: redis:// with timeouts in the query: release
ok: unix:// socket: acquire
ok: unix:// socket: lock key is in db 0
ok: unix:// socket: release
ok: unix:// socket with database=6: acquire
ok: unix:// socket with database=6: lock key is in db 6
ok: unix:// socket with database=6: release
ok: wrong password: ConnectionException
ok: wrong password: password not in message
ok: wrong ACL password: ConnectionException
ok: wrong ACL password: password not in message
ok: phpredis-style wrong auth: ConnectionException
ok: phpredis-style wrong auth: password not in message
ok: no password for a protected server: ConnectionException
ok: no password for a protected server: password not in message
ok: db 99 (beyond the 16 databases)
done
