--TEST--
Review of stop 58, the class handler called directly: a write after a read that failed is refused (it went on with an empty session and wrote it over another request's save); updateTimestamp() of unchanged data whose lock a logout revoked says true without a warning, as a destroy does (nothing was to be written; PHP warns of a false) and a fresh id is still not written with what the request holds; a save Redis refuses with an error frees the lock at once (Laravel never calls close())
--INI--
session.gc_maxlifetime=1440
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$warnings = [];
set_error_handler(function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$data = fn(string $id) => $raw->cmd('GET', "PHPREDIS_SESSION:$id");
$lock = fn(string $id) => "{PHPREDIS_SESSION:$id}:lock";

// 1. A read that failed (the lock wait ran out), then a write of what the
// caller made of it (an empty session): refused, over another request's save.
$id = str_repeat('a', 32);
$raw->cmd('SET', "PHPREDIS_SESSION:$id", 'cart|i:1;');
$b = new RedisLockingSessionHandler($dsn, ['lock_wait' => 5.0]);
rl_same('B reads (and locks) the session', 'cart|i:1;', $b->read($id));
$a = new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.1, 'on_lock_timeout' => 'fail']);
rl_same("A's read fails (the lock wait runs out)", false, $a->read($id));
rl_ok('... with a warning', count($warnings) === 1, implode("\n", $warnings));
rl_same('B saves', true, $b->write($id, 'cart|i:2;'));
$warnings = [];
rl_same("A's write of an empty session: false", false, $a->write($id, ''));
rl_ok('... with a warning saying it could not read it', count($warnings) === 1 && str_contains($warnings[0], 'could not read it'), implode("\n", $warnings));
rl_same("B's save is kept", 'cart|i:2;', $data($id));
rl_same("A's updateTimestamp(): false as well", false, $a->updateTimestamp($id, ''));
rl_same("B's save is still kept", 'cart|i:2;', $data($id));
rl_same('... and nothing holds its lock', 0, $raw->cmd('EXISTS', $lock($id)));
rl_same('A reads it again: the saved data', 'cart|i:2;', $a->read($id));
rl_same('... and may write it now', true, $a->write($id, 'cart|i:3;'));
rl_same('... written', 'cart|i:3;', $data($id));

// A handler that opened a session read-only, whose next read fails (data of another type): it says
// it is not read-only any more (a worker that serves many requests keeps one handler).
$ro = new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.1, 'on_lock_timeout' => 'readonly']);
$holder = new RedisLockingSessionHandler($dsn);
$busy = str_repeat('f', 32);
rl_same('another request holds a session', '', $holder->read($busy));
rl_same('... so this one opens it read-only', ['', true], [$ro->read($busy), $ro->isReadOnly()]);
$warnings = [];
$bad = str_repeat('g', 32);
$raw->cmd('RPUSH', "PHPREDIS_SESSION:$bad", 'not a session');
rl_same('its next read fails (data of another type)', false, $ro->read($bad));
rl_same('... and it is not read-only any more', false, $ro->isReadOnly());
$holder->close();

// 2. updateTimestamp() (lazy_write, unchanged data) of a session a logout
// revoked: true, no warning, and the session stays logged out.
$id = str_repeat('b', 32);
$raw->cmd('SET', "PHPREDIS_SESSION:$id", 'user|i:7;');
$warnings = [];
$h = new RedisLockingSessionHandler($dsn, ['lock_wait' => 5.0]);
rl_same('a request reads (and locks) the session', 'user|i:7;', $h->read($id));
$logout = new RedisLockingSessionHandler($dsn);
rl_same('another request logs out (destroy)', true, $logout->destroy($id));
rl_same("the first one's updateTimestamp(): true", true, $h->updateTimestamp($id, 'user|i:7;'));
rl_ok('... without a warning', $warnings === [], implode("\n", $warnings));
rl_same('... and it stays logged out', null, $data($id));
rl_same('a fresh id is not written with what it holds: false', false, $h->write(str_repeat('c', 32), 'user|i:7;'));
rl_same('... not written', null, $data(str_repeat('c', 32)));

echo "done\n";
?>
--EXPECT--
ok: B reads (and locks) the session
ok: A's read fails (the lock wait runs out)
ok: ... with a warning
ok: B saves
ok: A's write of an empty session: false
ok: ... with a warning saying it could not read it
ok: B's save is kept
ok: A's updateTimestamp(): false as well
ok: B's save is still kept
ok: ... and nothing holds its lock
ok: A reads it again: the saved data
ok: ... and may write it now
ok: ... written
ok: another request holds a session
ok: ... so this one opens it read-only
ok: its next read fails (data of another type)
ok: ... and it is not read-only any more
ok: a request reads (and locks) the session
ok: another request logs out (destroy)
ok: the first one's updateTimestamp(): true
ok: ... without a warning
ok: ... and it stays logged out
ok: a fresh id is not written with what it holds: false
ok: ... not written
done
