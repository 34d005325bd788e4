--TEST--
RedisLockingSessionHandler called as Laravel calls it (read/write/destroy only, no open/close, no session module): a fresh id written without a read after regenerate(), an early save followed by the framework's own, a second write that would overwrite another request's save refused quietly, a write refused while another request holds the id, the ttl option; no warnings for any of it
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
$locked = fn(string $id) => $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$id}:lock");
$conflicts = fn() => RedisLease\metrics()['session_write_conflicts'];
$opts = ['lock_wait' => 0.3, 'ttl' => 7200];

// Login: read the old id (locks it), then migrate(true): destroy the old id and
// write a fresh one, never read.
$h = new RedisLockingSessionHandler($dsn, $opts);
$old = str_repeat('a', 32);
$new = str_repeat('b', 32);
$raw->cmd('SET', "PHPREDIS_SESSION:$old", 'guest|b:1;');
rl_same('read() of the old id', 'guest|b:1;', $h->read($old));
rl_same('the old id is locked', 1, $locked($old));
rl_same('destroy() of the old id', true, $h->destroy($old));
rl_same('write() of a fresh id it never read', true, $h->write($new, 'user|i:7;'));
rl_same('the fresh id holds the data', 'user|i:7;', $data($new));
$ttl = $raw->cmd('TTL', "PHPREDIS_SESSION:$new");
rl_ok('with the ttl option (7200 s), not session.gc_maxlifetime', $ttl > 7100 && $ttl <= 7200, (string) $ttl);
rl_same('no lock is left behind', [0, 0], [$locked($old), $locked($new)]);

// regenerate() without destroy: the old id's lock goes when the new id is written.
$h = new RedisLockingSessionHandler($dsn, $opts);
$a = str_repeat('c', 32);
$b = str_repeat('d', 32);
$h->read($a);
rl_same('regenerate(): the old id is locked while read', 1, $locked($a));
rl_same('write() of the new id', true, $h->write($b, 'x|i:1;'));
rl_same('and the old id is unlocked then (the request moved on)', 0, $locked($a));

// An early save, then the framework's own save at the end of the request.
$h = new RedisLockingSessionHandler($dsn, $opts);
$id = str_repeat('e', 32);
$h->read($id);
rl_same('early save', true, $h->write($id, 'n|i:1;'));
rl_same('the same data saved again: true', true, $h->write($id, 'n|i:1;'));
rl_same('changed data saved again, nobody else wrote: true', true, $h->write($id, 'n|i:2;'));
rl_same('... and stored', 'n|i:2;', $data($id));
// Another request saves in between: our later write must not undo its save.
$other = new RedisLockingSessionHandler($dsn, $opts);
rl_same('another request reads what we saved', 'n|i:2;', $other->read($id));
rl_same('and saves its own', true, $other->write($id, 'n|i:2;other|b:1;'));
$before = $conflicts();
rl_same('our third save would overwrite it: refused, false', false, $h->write($id, 'n|i:3;'));
rl_same('... its save is kept', 'n|i:2;other|b:1;', $data($id));
rl_same('... counted as a conflict', $before + 1, $conflicts());
rl_same('... no lock left', 0, $locked($id));

// A fresh id another request holds (a collision, or a race): refused, nothing written.
$busy = str_repeat('f', 32);
$holder = new RedisLockingSessionHandler($dsn, $opts);
$holder->read($busy);
$h2 = new RedisLockingSessionHandler($dsn, $opts);
rl_same('write() of an id another request holds: false', false, $h2->write($busy, 'mine|b:1;'));
rl_same('... nothing written', null, $data($busy));
rl_same('... the holder keeps its lock and can save', true, $holder->write($busy, 'holder|b:1;'));

// A second write that finds the lock held waits for it (as a read would) and then
// writes, when the data is still what we saved.
$id2 = str_repeat('g', 32);
$h3 = new RedisLockingSessionHandler($dsn, ['lock_wait' => 5]);
$h3->read($id2);
rl_same('early save', true, $h3->write($id2, 'v|i:1;'));
$child = rl_spawn_php('
$h = new RedisLockingSessionHandler(' . rl_export($dsn) . ');
$h->read(' . rl_export($id2) . ');
echo "holding\n";
usleep(300000);
$h->close();
echo "closed\n";
');
rl_same('another request holds it (reading only)', 'holding', $child->readLine(10.0));
rl_same('our changed save waits for it, then writes', true, $h3->write($id2, 'v|i:2;'));
rl_same('... after the other closed', 'closed', $child->readLine(10.0));
rl_same('... stored', 'v|i:2;', $data($id2));
$child->wait(5.0);

rl_same('no warning at all', [], $warnings);
echo "done\n";
?>
--EXPECT--
ok: read() of the old id
ok: the old id is locked
ok: destroy() of the old id
ok: write() of a fresh id it never read
ok: the fresh id holds the data
ok: with the ttl option (7200 s), not session.gc_maxlifetime
ok: no lock is left behind
ok: regenerate(): the old id is locked while read
ok: write() of the new id
ok: and the old id is unlocked then (the request moved on)
ok: early save
ok: the same data saved again: true
ok: changed data saved again, nobody else wrote: true
ok: ... and stored
ok: another request reads what we saved
ok: and saves its own
ok: our third save would overwrite it: refused, false
ok: ... its save is kept
ok: ... counted as a conflict
ok: ... no lock left
ok: write() of an id another request holds: false
ok: ... nothing written
ok: ... the holder keeps its lock and can save
ok: early save
ok: another request holds it (reading only)
ok: our changed save waits for it, then writes
ok: ... after the other closed
ok: ... stored
ok: no warning at all
done
