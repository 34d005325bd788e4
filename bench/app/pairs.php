<?php
// bench/threads.php's lock loop: `n` acquire + release pairs of a new DistributedLock each (as
// applications write it) on key `key`, inside one request. Replies with the time they took.
$n = (int) ($_GET['n'] ?? 100);
$key = (string) ($_GET['key'] ?? 'bench:threads');
$dsn = $_SERVER['RL_DSN'];
$t = hrtime(true);
$ok = 0;
for ($i = 0; $i < $n; $i++) {
    $lock = new DistributedLock($key, 5.0, $dsn);
    $ok += $lock->acquire() && $lock->release() ? 1 : 0;
}
header('Content-Type: application/json');
echo json_encode(['ok' => $ok, 'seconds' => (hrtime(true) - $t) / 1e9, 'pid' => getmypid()]);
