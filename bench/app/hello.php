<?php
// The memory baseline's request, without redis_lease: the same session work on PHP's files handler.
ini_set('session.save_handler', 'files');
ini_set('session.save_path', $_SERVER['BENCH_FILES']);
ini_set('session.use_cookies', '0');
session_id('mem' . ($_GET['n'] % 64));
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
session_write_close();
echo 'ok';
