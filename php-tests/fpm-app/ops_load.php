<?php
// Load for the operators' checks (ops_prometheus.phpt): a lock (waiting up to `wait` s), a
// semaphore permit and a session, each held a moment.
$dsn = $_SERVER['RL_DSN'];
$lock = new DistributedLock('ops:hot', 5.0, $dsn);
if ($lock->acquire((float) ($_GET['wait'] ?? '0.05'))) {
    usleep(5000);
    $lock->release();
}
$sem = new DistributedSemaphore('ops:sem', 2, 5.0, $dsn);
if ($sem->acquire(0.02)) {
    usleep(2000);
    $sem->release();
}
session_set_save_handler(new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.05, 'on_lock_timeout' => 'readonly']), true);
session_id((string) ($_GET['sid'] ?? 'opsload1'));
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
session_write_close();
echo "ok\n";
