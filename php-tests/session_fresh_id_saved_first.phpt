--TEST--
Sessions called directly, as Laravel does: a fresh id a request moved to from a session it read (regenerate(): migrate()) is written only where nothing was saved under it. Another request that saved under it first (it got the fresh cookie; or it saved after this write timed out, and the write then lands late) keeps its save: the fresh id is refused, quietly (false without a warning, counted as a write conflict). Review, stop 59: before, it was written over. A handler that never reads (a write-only wrapper's store, as Symfony's MigratingSessionHandler makes) writes over what is there. A second fresh id (a second regenerate()) is written as the first (review, stop 61: it was written over a save)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$conflicts = static fn(): int => RedisLease\metrics()['session_write_conflicts'];
$other = new RedisLockingSessionHandler($srv['dsn']);
$other->open('', 'PHPSESSID');
$h = new RedisLockingSessionHandler($srv['dsn']);
$h->open('', 'PHPSESSID');
$old = rl_key('fresh-old');
$fresh = rl_key('fresh-new');
rl_same('the request reads its session', '', $h->read($old));
rl_same('another request saves under the fresh id', ['', true],
    [$other->read($fresh), $other->write($fresh, 'cart|i:1;')]);
$other->close();
$before = $conflicts();
$written = $h->write($fresh, 'user|s:5:"alice";');
rl_same('the fresh id is refused, quietly', [false, []], [$written, $warnings]);
rl_same('... the other request\'s save kept', 'cart|i:1;', $raw->cmd('GET', "PHPREDIS_SESSION:$fresh"));
rl_same('... counted as a write conflict', 1, $conflicts() - $before);
$h->close();
// Nothing under it: written, as before.
$h->open('', 'PHPSESSID');
$empty = rl_key('fresh-empty');
rl_same('a fresh id nobody saved under is written', [true, 'a|i:1;', []],
    [$h->write($empty, 'a|i:1;'), $raw->cmd('GET', "PHPREDIS_SESSION:$empty"), $warnings]);
$h->close();
// A second fresh id (a second regenerate(), after the first fresh id was saved):
// moved to as the first was (review, stop 61: written over a save).
$h->open('', 'PHPSESSID');
[$s2, $n1, $n2] = [rl_key('second-old'), rl_key('second-new1'), rl_key('second-new2')];
rl_same('a request reads its session, then saves a first fresh id', ['', true],
    [$h->read($s2), $h->write($n1, 'u|i:1;')]);
$other->open('', 'PHPSESSID');
rl_same('another request saves under the second fresh id', ['', true],
    [$other->read($n2), $other->write($n2, 'cart|i:3;')]);
$other->close();
rl_same('the second fresh id is refused, quietly; the save kept', [false, 'cart|i:3;', []],
    [$h->write($n2, 'u|i:2;'), $raw->cmd('GET', "PHPREDIS_SESSION:$n2"), $warnings]);
$h->close();
// A handler that never reads (the new store of Symfony's MigratingSessionHandler, written to beside
// the one read from) writes over what is there, as it means to.
$w = new RedisLockingSessionHandler($srv['dsn']);
$w->open('', 'PHPSESSID');
rl_same('a write-only handler writes over a stored session', [true, 'cart|i:2;', []],
    [$w->write($fresh, 'cart|i:2;'), $raw->cmd('GET', "PHPREDIS_SESSION:$fresh"), $warnings]);
$w->close();
echo "done\n";
?>
--EXPECT--
ok: the request reads its session
ok: another request saves under the fresh id
ok: the fresh id is refused, quietly
ok: ... the other request's save kept
ok: ... counted as a write conflict
ok: a fresh id nobody saved under is written
ok: a request reads its session, then saves a first fresh id
ok: another request saves under the second fresh id
ok: the second fresh id is refused, quietly; the save kept
ok: a write-only handler writes over a stored session
done
