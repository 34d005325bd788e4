--TEST--
Read/write lock: an upgrade (acquire() on a read hold) or a downgrade (acquireRead() on a write hold) whose own hold's lease ran out while another writer came and went must not report a conversion with nobody in between
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const LEASE = 0.2;

// Upgrade: R reads, its read lease runs out (a pause, a ttl too short), a writer
// comes and goes, then R "upgrades" and writes from what it read.
$k = rl_key('up-lapsed');
$r = new DistributedLock($k, LEASE, $dsn);
rl_same('R holds a read hold', true, $r->acquireRead());
$raw->cmd('SET', 'data', 'v1');
$seen = $raw->cmd('GET', 'data');
$w = new DistributedLock($k, 5.0, $dsn);
rl_same('a writer gets in once R\'s read lease ran out (it waits for that)', true, $w->acquire(5.0));
$raw->cmd('SET', 'data', 'v2');
rl_same('and leaves', true, $w->release());
$up = $r->acquire(1.0);
rl_ok("R's upgrade does not report success: a writer came between its read and its write",
    $up === false, 'acquire() returned ' . rl_fmt($up) . " after R read '$seen'; the data is now '" . $raw->cmd('GET', 'data') . "'");
$r->release();

// Downgrade: D writes, its write lease runs out, another writer comes and goes,
// then D "downgrades" and reads.
$k = rl_key('down-lapsed');
$d = new DistributedLock($k, LEASE, $dsn);
rl_same('D holds the lock alone', true, $d->acquire());
$raw->cmd('SET', 'data2', 'mine');
$w = new DistributedLock($k, 5.0, $dsn);
rl_same('another writer gets in once D\'s lease ran out (it waits for that)', true, $w->acquire(5.0));
$raw->cmd('SET', 'data2', 'theirs');
rl_same('and leaves', true, $w->release());
$down = $d->acquireRead();
rl_ok("D's downgrade does not report success: a writer came between its write and its read",
    $down === false, 'acquireRead() returned ' . rl_fmt($down) . "; D now reads '" . $raw->cmd('GET', 'data2') . "'");
$d->release();
echo "done\n";
?>
--EXPECT--
ok: R holds a read hold
ok: a writer gets in once R's read lease ran out (it waits for that)
ok: and leaves
ok: R's upgrade does not report success: a writer came between its read and its write
ok: D holds the lock alone
ok: another writer gets in once D's lease ran out (it waits for that)
ok: and leaves
ok: D's downgrade does not report success: a writer came between its write and its read
done
