--TEST--
A save that Redis refuses with an error reply (here: an expiry it cannot store, from session.gc_maxlifetime) is reported and never keeps the session's lock: neither the handler's own session (freed at once: Laravel never calls close()) nor one it locked only to write over another request's save (a write() after close(), waiting its turn); the next request takes the lock at once
--INI--
session.gc_maxlifetime=9223372036854776
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$warnings = [];
set_error_handler(function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$id = str_repeat('c', 32);
$lock = "{PHPREDIS_SESSION:$id}:lock";
$raw->cmd('SET', "PHPREDIS_SESSION:$id", 'a|i:0;');
$h = new RedisLockingSessionHandler($srv['dsn'], ['lock_wait' => 2.0]);

rl_same('read() locks it', 'a|i:0;', $h->read($id));
rl_same('write() refused by Redis: false', false, $h->write($id, 'a|i:0;b|i:1;'));
rl_ok('... with a warning naming the error', count($warnings) === 1 && str_contains($warnings[0], 'invalid expire time'), implode("\n", $warnings));
rl_same('... and the lock is freed at once (Laravel never calls close())', 0, $raw->cmd('EXISTS', $lock));
rl_same('close() after it: true', true, $h->close());

// Another request holds it for 300 ms: write() waits its turn, locks it itself,
// and Redis refuses the save.
$raw->cmd('SET', $lock, 'other:0', 'PX', '300');
$warnings = [];
rl_same('a write() after close(), refused by Redis: false', false, $h->write($id, 'a|i:1;'));
rl_ok('... with a warning naming the error', count($warnings) === 1 && str_contains($warnings[0], 'invalid expire time'), implode("\n", $warnings));
rl_same('... and the lock it took for it is freed', -2, $raw->cmd('PTTL', $lock));
rl_same('the data is as it was', 'a|i:0;', $raw->cmd('GET', "PHPREDIS_SESSION:$id"));

$next = new RedisLockingSessionHandler($srv['dsn'], ['lock_wait' => 0.0]);
rl_same('the next request locks it at once', 'a|i:0;', $next->read($id));
rl_ok('... and it is not read-only', $next->isReadOnly() === false);
$next->close();
echo "done\n";
?>
--EXPECT--
ok: read() locks it
ok: write() refused by Redis: false
ok: ... with a warning naming the error
ok: ... and the lock is freed at once (Laravel never calls close())
ok: close() after it: true
ok: a write() after close(), refused by Redis: false
ok: ... with a warning naming the error
ok: ... and the lock it took for it is freed
ok: the data is as it was
ok: the next request locks it at once
ok: ... and it is not read-only
done
