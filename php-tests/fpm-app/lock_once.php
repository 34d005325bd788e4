<?php
// Takes and releases one DistributedLock; reports this worker's pid and its own counters.
$lock = new DistributedLock('fpm-metrics:' . ($_GET['n'] ?? '0'), 5.0, $_SERVER['RL_DSN']);
$ok = $lock->acquire(1.0) && $lock->release();
header('Content-Type: application/json');
echo json_encode(['ok' => $ok, 'pid' => getmypid(), 'mine' => RedisLease\metrics()['lock_acquired']]);
