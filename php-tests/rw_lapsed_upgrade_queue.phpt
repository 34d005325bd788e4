--TEST--
Read/write lock: an upgrade told no leaves the queue in the same step. A reader whose read lease runs out while it waits to upgrade gets false and no place in the queue, so the next release does not hand the lock to its abandoned token and the next writer gets it at once; an upgrade refused because another reader waits to upgrade (after its own earlier attempt queued it) leaves the queue too
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// 1. The issue's case: readers A and B; A shortens its lease, then waits to
// upgrade; its read lease runs out meanwhile.
$k = rl_key('lapsed-up');
$lk = rl_lock_key($k);
$a = new DistributedLock($k, 30.0, $dsn);
$b = new DistributedLock($k, 30.0, $dsn);
rl_same('A reads', true, $a->acquireRead());
rl_same('B reads', true, $b->acquireRead());
rl_same('A shortens its read lease to 0.3 s', true, $a->refresh(0.3));
$t = microtime(true);
$up = $a->acquire(5.0);
$took = microtime(true) - $t;
rl_same("A's upgrade returns false: its read lease ran out while it waited", false, $up);
rl_ok('... once the lease ran out, not at the end of the 5 s wait', $took < 2.5, sprintf('%.2f s', $took));
rl_same("A's token is not in the queue", [], $raw->cmd('ZRANGE', "$lk:waiters", 0, -1));
rl_same('nor in its terms', 0, $raw->cmd('EXISTS', "$lk:terms"));
rl_same('B releases', true, $b->release());
rl_same('the lock is free: not handed to an abandoned token', 0, $raw->cmd('EXISTS', $lk));
$w = new DistributedLock($k, 30.0, $dsn);
$t = microtime(true);
rl_same('the next writer gets the lock at once (acquire(0))', true, $w->acquire(0.0));
rl_same('A holds nothing', [null, false], [$a->getToken(), $a->isAcquired()]);
rl_same('W releases', true, $w->release());

// 2. The -3 path after an earlier attempt queued the token. Driven through the
// script itself (acquire.lua, as the extension sends it), so that the order is
// exact: A queues to upgrade; A goes silent (its terms say it was last heard
// long ago, as when its process is paused), so C, also upgrading, queues ahead
// of it; A's next attempt finds C waiting to upgrade first and is refused.
$k = rl_key('refused-up');
$lk = rl_lock_key($k);
$src = rl_script_compose(file_get_contents(__DIR__ . '/../src/core/scripts/lib.lua'),
    file_get_contents(__DIR__ . '/../src/core/scripts/acquire.lua'));
$acquire = static fn(string $tok, string $mode, int $waitMs) => $raw->cmd('EVAL', $src, 6, $lk, "$lk:fence",
    "$lk:waiters", "$lk:terms", "$lk:void:$tok", "$lk:holders", $tok, '30000', (string) $waitMs, $mode, '0');
$ta = str_repeat('a', 32);
$tc = str_repeat('c', 32);
rl_same('A reads', [1, '0'], $acquire($ta, 'r', 0));
rl_same('C reads', [1, '0'], $acquire($tc, 'r', 0));
rl_same('A asks to upgrade and queues', 0, $acquire($ta, 'u', 5000)[0]);
rl_same('A is queued', [$ta], $raw->cmd('ZRANGE', "$lk:waiters", 0, -1));
$now = (int) ($raw->cmd('TIME')[0]) * 1000;
$raw->cmd('HSET', "$lk:terms", $ta, "30000 " . ($now + 5000) . " " . ($now - 1000) . " u");
rl_same('C asks to upgrade, passes over the silent A and queues ahead of it', 0, $acquire($tc, 'u', 5000)[0]);
rl_same('C then A', [$tc, $ta], $raw->cmd('ZRANGE', "$lk:waiters", 0, -1));
rl_same("A's next attempt is refused: another reader waits to upgrade", [-3, 0], $acquire($ta, 'u', 5000));
rl_same('and A has left the queue', [$tc], $raw->cmd('ZRANGE', "$lk:waiters", 0, -1));
rl_same("A's terms are gone", 0, $raw->cmd('HEXISTS', "$lk:terms", $ta));
echo "done\n";
?>
--EXPECT--
ok: A reads
ok: B reads
ok: A shortens its read lease to 0.3 s
ok: A's upgrade returns false: its read lease ran out while it waited
ok: ... once the lease ran out, not at the end of the 5 s wait
ok: A's token is not in the queue
ok: nor in its terms
ok: B releases
ok: the lock is free: not handed to an abandoned token
ok: the next writer gets the lock at once (acquire(0))
ok: A holds nothing
ok: W releases
ok: A reads
ok: C reads
ok: A asks to upgrade and queues
ok: A is queued
ok: C asks to upgrade, passes over the silent A and queues ahead of it
ok: C then A
ok: A's next attempt is refused: another reader waits to upgrade
ok: and A has left the queue
ok: A's terms are gone
done
