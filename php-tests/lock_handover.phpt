--TEST--
DistributedLock handover: getToken(), detach() and restore() move a hold to another process (released there, refreshed there, kept across the first one's end until its ttl); forceRelease() frees a lock whoever holds it and hands it at once to the first waiter with a higher fencing token; a stale or malformed token holds nothing
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// 1. Taken in one process, detached (its end releases nothing), restored and
// released in another.
$k = rl_key('handover');
$child = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', 10.0, ' . rl_export($dsn) . ');
echo $l->acquire() ? "held\n" : "busy\n";
$fence = $l->getFencingToken();
echo $l->getToken(), " ", $fence, "\n";
$t = $l->detach();
echo $t === null ? "no token\n" : "detached\n";
echo $l->getToken() === null ? "no hold here\n" : "still holds\n";
');
rl_same('the first process holds it', 'held', $child->readLine(10.0));
[$token, $fence] = explode(' ', (string) $child->readLine(10.0)) + [1 => ''];
rl_ok('getToken() gives an opaque token', (bool) preg_match('/^[0-9a-f]{32}$/', $token), $token);
rl_same('detach() gives the token back', 'detached', $child->readLine(10.0));
rl_same('and the object holds nothing afterwards', 'no hold here', $child->readLine(10.0));
rl_same('the first process ends', 0, $child->wait(10.0));
$left = $raw->cmd('PTTL', rl_lock_key($k));
rl_ok('its end released nothing: the lock lives on until its ttl', $left > 8000 && $left <= 10000, (string) $left);
$restored = DistributedLock::restore($k, $token, 10.0, $dsn);
rl_same('restore() in another process holds it', true, $restored->isAcquired());
rl_same('with the same fencing token', (int) $fence, $restored->getFencingToken());
rl_same('refresh() works there', true, $restored->refresh(20.0));
rl_ok('... and sets the new ttl', $raw->cmd('PTTL', rl_lock_key($k)) > 18000);
rl_same('release() works there', true, $restored->release());
rl_same('the lock is free', 0, $raw->cmd('EXISTS', rl_lock_key($k)));
$stale = DistributedLock::restore($k, $token, 10.0, $dsn);
rl_same('a stale token holds nothing: isAcquired()', false, $stale->isAcquired());
rl_same('... release()', false, $stale->release());
rl_same('... getToken()', null, $stale->getToken());

// 2. A detached hold without an explicit release expires at its ttl.
$k2 = rl_key('detached-expires');
$l = new DistributedLock($k2, 0.3, $dsn);
rl_same('acquire', true, $l->acquire());
$l->detach();
unset($l);
rl_same('kept after its object is gone', 1, $raw->cmd('EXISTS', rl_lock_key($k2)));
rl_ok('gone after its ttl', rl_wait_until(fn() => $raw->cmd('EXISTS', rl_lock_key($k2)) === 0, 3.0, 0.01));

// 3. forceRelease() hands the lock to the first waiter at once.
$k3 = rl_key('forced');
$holder = new DistributedLock($k3, 30.0, $dsn);
rl_same('a holder takes it', true, $holder->acquire());
$held = $holder->getFencingToken();
$waiter = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k3) . ', 30.0, ' . rl_export($dsn) . ');
echo "waiting\n";
$t = hrtime(true);
$got = $l->acquire(10.0);
echo ($got ? "got " : "none "), $l->getFencingToken(), " ", hrtime(true), "\n";
$l->release();
');
rl_same('a waiter waits', 'waiting', $waiter->readLine(10.0));
rl_ok('queued', rl_wait_until(fn() => $raw->cmd('ZCARD', rl_lock_key($k3) . ':waiters') === 1, 5.0, 0.002));
$forced = hrtime(true);
rl_same('forceRelease() says it was held', true, DistributedLock::forceRelease($k3, $dsn));
[$got, $wfence, $at] = explode(' ', (string) $waiter->readLine(10.0)) + [1 => 0, 2 => 0];
rl_same('the waiter got it', 'got', $got);
rl_ok('at once (well under its 10 s wait and the 30 s ttl)', ($at - $forced) / 1e9 < 0.5, sprintf('%.3f s', ($at - $forced) / 1e9));
rl_ok('with a higher fencing token than the holder it was taken from', (int) $wfence > $held, "$held then $wfence");
rl_same('the old holder is told: release() false', false, $holder->release());
rl_same('the waiter exits', 0, $waiter->wait(10.0));
rl_same('forceRelease() of a free lock: false', false, DistributedLock::forceRelease($k3, $dsn));

// 4. restore() asks nothing of Redis: a handover costs the release's (or the
// refresh's) round trip only, as in the process that took the hold.
$k4 = rl_key('lazy');
$a = new DistributedLock($k4, 10.0, $dsn);
rl_same('taken', true, $a->acquire());
$t4 = $a->detach();
$count = fn() => (int) preg_replace('/.*total_commands_processed:(\d+).*/s', '$1', $raw->cmd('INFO', 'stats'));
$before = $count();
$lazy = DistributedLock::restore($k4, $t4, 10.0, $dsn);
rl_same('restore() sent nothing (only our INFO ran between)', 1, $count() - $before);
rl_same('its token is there without asking', $t4, $lazy->getToken());
rl_same('released by its token', true, $lazy->release());
rl_same('the lock is free', 0, $raw->cmd('EXISTS', rl_lock_key($k4)));
$gone = DistributedLock::restore($k4, $t4, 10.0, $dsn);
rl_same('a stale token restored: refresh() false', false, $gone->refresh());
rl_same('... release() false', false, $gone->release());
rl_same('... getFencingToken() null', null, DistributedLock::restore($k4, $t4, 10.0, $dsn)->getFencingToken());
rl_same('... acquire() takes the lock anew', true, ($fresh = DistributedLock::restore($k4, $t4, 10.0, $dsn))->acquire());
rl_ok('... under a new token', $fresh->getToken() !== $t4, (string) $fresh->getToken());
$fresh->release();
// A reader's hold restored: shared, so no fencing token; released as a reader.
$r = new DistributedLock($k4, 10.0, $dsn);
rl_same('a reader takes it', true, $r->acquireRead());
$rt = $r->detach();
$rr = DistributedLock::restore($k4, $rt, 10.0, $dsn);
rl_same('restored reader: no fencing token', null, $rr->getFencingToken());
rl_same('restored reader: isAcquired()', true, $rr->isAcquired());
rl_same('restored reader: release()', true, $rr->release());
rl_same('no reader left', 0, $raw->cmd('ZCARD', rl_lock_key($k4) . ':holders'));
// With autoRenew, Redis is asked at once (renewals need the lease's end).
$w = new DistributedLock($k4, 10.0, $dsn);
rl_same('taken again', true, $w->acquire());
$wt = $w->detach();
$before = $count();
$renewed = DistributedLock::restore($k4, $wt, 10.0, $dsn, true);
rl_ok('restore() with autoRenew asks at once', $count() - $before > 1, (string) ($count() - $before));
rl_same('and holds it', true, $renewed->release());

// 5. isLocked(): whether anyone holds it, without taking it.
$k5 = rl_key('is-locked');
rl_same('isLocked(): free', false, DistributedLock::isLocked($k5, $dsn));
$h = new DistributedLock($k5, 10.0, $dsn);
$h->acquire();
rl_same('isLocked(): held alone', true, DistributedLock::isLocked($k5, $dsn));
rl_same('... and still ours (isLocked takes nothing)', true, $h->release());
rl_same('isLocked(): released', false, DistributedLock::isLocked($k5, $dsn));
$reader = new DistributedLock($k5, 0.3, $dsn);
$reader->acquireRead();
rl_same('isLocked(): a reader holds it', true, DistributedLock::isLocked($k5, $dsn));
$reader->detach();
rl_ok('isLocked(): false once the reader\'s lease ran out', rl_wait_until(fn() => !DistributedLock::isLocked($k5, $dsn), 3.0, 0.01));
// A reader's entry whose lease has ended but which is still listed (its key
// expires with the longest lease) holds nothing.
$raw->cmd('ZADD', rl_lock_key($k5) . ':holders', '1', str_repeat('ab', 16));
rl_same('isLocked(): a listed reader whose lease ended holds nothing', false, DistributedLock::isLocked($k5, $dsn));
$raw->cmd('DEL', rl_lock_key($k5) . ':holders');
try {
    DistributedLock::isLocked($k5, 'redis://127.0.0.1:1?timeout=nope');
    rl_ok('isLocked() refuses a malformed DSN', false);
} catch (ValueError $e) {
    rl_ok('isLocked() refuses a malformed DSN (ValueError)', true);
}

// 6. Bad input.
foreach (['', 'not-a-token', str_repeat('G', 32), strtoupper(str_repeat('ab', 16))] as $bad) {
    try {
        DistributedLock::restore($k, $bad, 10.0, $dsn);
        rl_ok('restore() refuses ' . var_export($bad, true), false);
    } catch (ValueError $e) {
        rl_ok('restore() refuses ' . var_export($bad, true) . ' (ValueError naming $token)', str_contains($e->getMessage(), '$token'), $e->getMessage());
    }
}
echo "done\n";
?>
--EXPECT--
ok: the first process holds it
ok: getToken() gives an opaque token
ok: detach() gives the token back
ok: and the object holds nothing afterwards
ok: the first process ends
ok: its end released nothing: the lock lives on until its ttl
ok: restore() in another process holds it
ok: with the same fencing token
ok: refresh() works there
ok: ... and sets the new ttl
ok: release() works there
ok: the lock is free
ok: a stale token holds nothing: isAcquired()
ok: ... release()
ok: ... getToken()
ok: acquire
ok: kept after its object is gone
ok: gone after its ttl
ok: a holder takes it
ok: a waiter waits
ok: queued
ok: forceRelease() says it was held
ok: the waiter got it
ok: at once (well under its 10 s wait and the 30 s ttl)
ok: with a higher fencing token than the holder it was taken from
ok: the old holder is told: release() false
ok: the waiter exits
ok: forceRelease() of a free lock: false
ok: taken
ok: restore() sent nothing (only our INFO ran between)
ok: its token is there without asking
ok: released by its token
ok: the lock is free
ok: a stale token restored: refresh() false
ok: ... release() false
ok: ... getFencingToken() null
ok: ... acquire() takes the lock anew
ok: ... under a new token
ok: a reader takes it
ok: restored reader: no fencing token
ok: restored reader: isAcquired()
ok: restored reader: release()
ok: no reader left
ok: taken again
ok: restore() with autoRenew asks at once
ok: and holds it
ok: isLocked(): free
ok: isLocked(): held alone
ok: ... and still ours (isLocked takes nothing)
ok: isLocked(): released
ok: isLocked(): a reader holds it
ok: isLocked(): false once the reader's lease ran out
ok: isLocked(): a listed reader whose lease ended holds nothing
ok: isLocked() refuses a malformed DSN (ValueError)
ok: restore() refuses '' (ValueError naming $token)
ok: restore() refuses 'not-a-token' (ValueError naming $token)
ok: restore() refuses 'GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG' (ValueError naming $token)
ok: restore() refuses 'ABABABABABABABABABABABABABABABAB' (ValueError naming $token)
done
