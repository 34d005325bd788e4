--TEST--
Read/write locks: the holes the model (tests/model.rs, fixes (i) to (l)) found, against a real Redis: a stale wake-up of a reader's earlier grant is not taken by its upgrade for the lock; a token resolve.lua found holding is voided, so its late attempt takes nothing once released (its conversions still work); an upgrade whose read hold was released after it gave up is not handed the lock; a downgrade whose reply was lost does not leave the object claiming the lock alone (it lets the hold go)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$scripts = __DIR__ . '/../src/core/scripts/';
$lib = file_get_contents($scripts . 'lib.lua');
$src = static fn(string $name) => rl_script_compose($lib, file_get_contents($scripts . $name));
[$acquireLua, $releaseLua, $resolveLua] = [$src('acquire.lua'), $src('release.lua'), $src('resolve.lua')];
// acquire.lua, release.lua and resolve.lua as the extension sends them (KEYS and ARGV as in lease.rs).
$acquire = static fn(string $lk, string $t, string $mode, int $waitMs) => $raw->cmd('EVAL', $acquireLua, 6, $lk,
    "$lk:fence", "$lk:waiters", "$lk:terms", "$lk:void:$t", "$lk:holders", $t, '30000', (string) $waitMs, $mode, '0');
$release = static fn(string $lk, string $t) => $raw->cmd('EVAL', $releaseLua, 5, $lk, "$lk:fence", "$lk:waiters",
    "$lk:terms", "$lk:holders", $t);
$resolve = static fn(string $lk, string $t) => $raw->cmd('EVAL', $resolveLua, 5, $lk, "$lk:waiters", "$lk:terms",
    "$lk:void:$t", "$lk:holders", $t, '90000');
$tok = static fn(string $c) => str_repeat($c, 32);

// (j) A reader queued behind a writer is granted a read hold by the writer's
// downgrade (a wake-up pushed); its next attempt takes the hold by the fast path
// and does not read the wake-up. Its upgrade, while another reader holds, must
// not pop that wake-up as the lock.
$k = rl_key('stale-wake');
$lk = rl_lock_key($k);
[$tw, $tr] = [$tok('a'), $tok('b')];
rl_same('(j) W takes the lock', 1, $acquire($lk, $tw, 'w', 0)); // the fast path's bare 1
rl_same('(j) R queues as a reader', 0, $acquire($lk, $tr, 'r', 5000)[0]);
rl_same('(j) W downgrades: R is let in with it', [1, '0'], $acquire($lk, $tw, 'd', 0));
rl_same("(j) R's grant left a wake-up on its list", 1, $raw->cmd('LLEN', "$lk:wake:$tr"));
rl_same("(j) R's next attempt finds its read hold", 1, $acquire($lk, $tr, 'r', 4000)[0]);
$r = DistributedLock::restore($k, $tr, 30.0, $dsn);
$t = microtime(true);
$up = $r->acquire(0.5);
rl_same('(j) R upgrades while W still reads: refused after its wait, not granted by the stale wake-up', false, $up);
rl_same('(j) ... and the lock is still free of a writer, R and W both read', [null, 2],
    [$raw->cmd('GET', $lk), $raw->cmd('ZCARD', "$lk:holders")]);
rl_ok('(j) ... it waited (no wake-up popped at once)', microtime(true) - $t >= 0.45, sprintf('%.3f s', microtime(true) - $t));
rl_same('(j) the stale wake-up is gone', 0, $raw->cmd('EXISTS', "$lk:wake:$tr"));
rl_same('(j) W leaves', 1, $release($lk, $tw));
rl_same('(j) now the upgrade is granted, with a fence', true, $r->acquire(1.0) && is_int($r->getFencingToken()));
rl_same('(j) released', true, $r->release());

// (k) A token that queued, then was handed the lock while its next attempt was
// still on its way: resolve.lua adopts it (it holds the lock) and voids it; the
// holder releases; the late attempt then arrives and must take nothing.
$k = rl_key('late-adopted');
$lk = rl_lock_key($k);
[$tw, $tc] = [$tok('c'), $tok('d')];
rl_same('(k) W takes the lock', 1, $acquire($lk, $tw, 'w', 0));
rl_same("(k) C's first attempt queues", 0, $acquire($lk, $tc, 'w', 5000)[0]);
rl_same("(k) W releases: the lock goes to C's token", 1, $release($lk, $tw));
rl_same("(k) C's client lost its second attempt's reply: resolve.lua finds the token holding", 2,
    count($resolve($lk, $tc) ?: []));
rl_same('(k) ... and voids it all the same', 1, $raw->cmd('EXISTS', "$lk:void:$tc"));
rl_same('(k) C works and releases', 1, $release($lk, $tc));
rl_same('(k) the late second attempt arrives: refused as voided', [0, -2], $acquire($lk, $tc, 'w', 4000));
rl_same('(k) the lock is free', 0, $raw->cmd('EXISTS', $lk));
// A voided holder's conversions still act on what it holds.
[$tv] = [$tok('e')];
rl_same('(k) V reads', [1, '0'], $acquire($lk, $tv, 'r', 0));
rl_same('(k) resolve.lua finds V reading, and voids it', '-', ($resolve($lk, $tv) ?: [null, null])[1]);
rl_same("(k) V's upgrade still works (a conversion ignores the marker)", 1, $acquire($lk, $tv, 'u', 0)[0]);
rl_same("(k) V's downgrade too", [1, '0'], $acquire($lk, $tv, 'd', 0));
rl_same("(k) but a fresh read claim of V's token is refused", [0, -2], $acquire($lk, $tv, 'r', 0));
rl_same('(k) V releases', 1, $release($lk, $tv));

// (l) An upgrade queued (its client then gave up on it with an error, so the
// entry stays), its holder releases the read hold; the next release must not
// hand the lock to that token.
$k = rl_key('released-upgrade');
$lk = rl_lock_key($k);
[$ta, $tb] = [$tok('f'), $tok('0')];
rl_same('(l) A reads', 1, $acquire($lk, $ta, 'r', 0)[0]);
rl_same('(l) B reads', 1, $acquire($lk, $tb, 'r', 0)[0]);
rl_same('(l) A asks to upgrade and queues', 0, $acquire($lk, $ta, 'u', 5000)[0]);
rl_same('(l) A releases its read hold (its upgrade gave up with an error)', 1, $release($lk, $ta));
rl_same('(l) B releases', 1, $release($lk, $tb));
rl_same('(l) the lock is free, not handed to A', 0, $raw->cmd('EXISTS', $lk));
rl_same("(l) A's upgrade left the queue", 0, $raw->cmd('EXISTS', "$lk:waiters"));

// (i) A downgrade whose reply is lost (cut after it ran) with Redis unreachable
// afterwards: the object must not go on claiming the lock alone. It lets the hold
// go (the downgrade might also still be on its way, and run after any question):
// its next call completes the release, whatever the downgrade made of it.
$proxy = FaultProxy::start($srv['port']);
$pdsn = $proxy->dsn('connect_timeout=1&read_timeout=1');
$k = rl_key('cut-downgrade');
$lk = rl_lock_key($k);
$d = new DistributedLock($k, 30.0, $pdsn);
rl_same('(i) D takes the lock through the proxy', true, $d->acquire());
$fence = $d->getFencingToken();
rl_ok('(i) with a fencing token', is_int($fence));
$proxy->arm('cut', [$lk, rl_script_marker('acquire.lua'), "\r\n\$1\r\nd\r\n"], 'down');
$res = fault_outcome(fn() => $d->acquireRead());
rl_ok('(i) the downgrade throws (its outcome unknown)', $res['exception'] !== null, json_encode($res));
rl_same('(i) in Redis it ran: D\'s token reads', [null, 1], [$raw->cmd('GET', $lk), $raw->cmd('ZCARD', "$lk:holders")]);
rl_same('(i) D holds nothing now: no token to hand out', null, $d->getToken());
$other = new DistributedLock($k, 30.0, $dsn);
rl_same('(i) another reader comes in beside it', true, $other->acquireRead());
$proxy->up();
$ran = false;
$e = rl_throws('(i) synchronized() on D releases what it let go, then waits for the lock alone in vain', RedisLease\LockTimeoutException::class,
    static function () use ($d, &$ran) {
        $d->synchronized(static function () use (&$ran) {
            $ran = true;
        }, 0.2);
    });
rl_same('(i) the callback never ran beside the other reader', false, $ran);
rl_same('(i) D\'s read hold is gone: only the other reader reads', [$other->getToken()], $raw->cmd('ZRANGE', "$lk:holders", 0, -1));
rl_same('(i) D has no fencing token', null, $d->getFencingToken());
rl_same('(i) D has nothing left to release', false, $d->release());
rl_same('(i) the other reader releases', true, $other->release());
echo "done\n";
?>
--EXPECT--
ok: (j) W takes the lock
ok: (j) R queues as a reader
ok: (j) W downgrades: R is let in with it
ok: (j) R's grant left a wake-up on its list
ok: (j) R's next attempt finds its read hold
ok: (j) R upgrades while W still reads: refused after its wait, not granted by the stale wake-up
ok: (j) ... and the lock is still free of a writer, R and W both read
ok: (j) ... it waited (no wake-up popped at once)
ok: (j) the stale wake-up is gone
ok: (j) W leaves
ok: (j) now the upgrade is granted, with a fence
ok: (j) released
ok: (k) W takes the lock
ok: (k) C's first attempt queues
ok: (k) W releases: the lock goes to C's token
ok: (k) C's client lost its second attempt's reply: resolve.lua finds the token holding
ok: (k) ... and voids it all the same
ok: (k) C works and releases
ok: (k) the late second attempt arrives: refused as voided
ok: (k) the lock is free
ok: (k) V reads
ok: (k) resolve.lua finds V reading, and voids it
ok: (k) V's upgrade still works (a conversion ignores the marker)
ok: (k) V's downgrade too
ok: (k) but a fresh read claim of V's token is refused
ok: (k) V releases
ok: (l) A reads
ok: (l) B reads
ok: (l) A asks to upgrade and queues
ok: (l) A releases its read hold (its upgrade gave up with an error)
ok: (l) B releases
ok: (l) the lock is free, not handed to A
ok: (l) A's upgrade left the queue
ok: (i) D takes the lock through the proxy
ok: (i) with a fencing token
ok: (i) the downgrade throws (its outcome unknown)
ok: (i) in Redis it ran: D's token reads
ok: (i) D holds nothing now: no token to hand out
ok: (i) another reader comes in beside it
ok: (i) synchronized() on D releases what it let go, then waits for the lock alone in vain
ok: (i) the callback never ran beside the other reader
ok: (i) D's read hold is gone: only the other reader reads
ok: (i) D has no fencing token
ok: (i) D has nothing left to release
ok: (i) the other reader releases
done
