--TEST--
DistributedLock::acquire($wait): a waiter is woken as soon as another process releases, far earlier than the ttl
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('wakeup');
$rk = rl_lock_key($k);

// The child holds the lock (ttl 30) until told to release. Once told, it
// waits until our acquire() is blocked (the waiter marker exists in Redis),
// then releases and reports when.
$child = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', 30.0, ' . rl_export($dsn) . ');
if (!$l->acquire()) { echo "child: acquire failed\n"; exit(1); }
echo "held\n";
if (trim((string) fgets(STDIN)) !== "release") { echo "child: no release command\n"; exit(1); }
$raw = new RlRaw(' . $srv['port'] . ');
$seen = rl_wait_until(fn() => $raw->cmd("EXISTS", ' . rl_export($rk . ':waiters') . ') === 1, 3.0, 0.002);
echo $seen ? "waiter-seen\n" : "waiter-not-seen\n";
$t = microtime(true);
$ok = $l->release();
echo "released ", $ok ? "true" : "false", " ", sprintf("%.6f", $t), "\n";
');

rl_same('child reports it holds the lock', 'held', $child->readLine(10.0));
$waiter = new DistributedLock($k, 30.0, $dsn);
$child->send('release');
$t0 = microtime(true);
$got = $waiter->acquire(5.0);
$t1 = microtime(true);
rl_same('acquire(wait: 5) returns true after the release', true, $got);
rl_same('child saw the waiter marker lock:{K}:waiters while we waited', 'waiter-seen', $child->readLine(10.0));
$line = (string) $child->readLine(10.0);
$parts = explode(' ', $line);
rl_same('child release() returned true', 'true', $parts[1] ?? $line);
$tRel = (float) ($parts[2] ?? 0);
rl_ok('acquire returned after the release started', $tRel > 0 && $t1 >= $tRel, sprintf('release at %.6f, acquire returned at %.6f', $tRel, $t1));
rl_ok('woken within 0.25 s of the release', $tRel > 0 && $t1 - $tRel < 0.25, sprintf('%.3f s after release', $t1 - $tRel));
rl_ok('total wait far below the ttl (< 5 s)', $t1 - $t0 < 5.0, sprintf('%.3f s', $t1 - $t0));
rl_same('child exits cleanly', 0, $child->wait(10.0));
rl_same('we hold the lock', true, $waiter->isAcquired());
rl_same('release', true, $waiter->release());

unset($waiter);
echo "done\n";
?>
--EXPECT--
ok: child reports it holds the lock
ok: acquire(wait: 5) returns true after the release
ok: child saw the waiter marker lock:{K}:waiters while we waited
ok: child release() returned true
ok: acquire returned after the release started
ok: woken within 0.25 s of the release
ok: total wait far below the ttl (< 5 s)
ok: child exits cleanly
ok: we hold the lock
ok: release
done
