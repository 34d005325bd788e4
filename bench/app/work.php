<?php
// The memory scenario's request with redis_lease: a session (as the baseline does on files) and a lock.
ini_set('session.save_handler', 'redis_lease');
ini_set('session.save_path', 'tcp://' . $_SERVER['BENCH_REDIS']);
ini_set('session.use_cookies', '0');
session_id('mem' . ($_GET['n'] % 64));
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
session_write_close();
$lock = new DistributedLock('mem:' . ($_GET['n'] % 64), 5.0, 'redis://' . $_SERVER['BENCH_REDIS']);
$lock->acquire(1.0);
$lock->release();
echo 'ok';
