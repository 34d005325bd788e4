<?php
// One session request for the benchmarks: ?h=lease|phpredis|phpredis_lock|files
// &sid=..&key=..&work_ms=..  Adds one key after the work and reports the key count.
$redis = $_SERVER['BENCH_REDIS'];              // host:port
switch ($_GET['h']) {
    case 'lease':
        ini_set('session.save_handler', 'redis_lease');
        ini_set('session.save_path', "tcp://$redis");
        break;
    case 'phpredis':
    case 'phpredis_lock':
        ini_set('session.save_handler', 'redis');
        ini_set('session.save_path', "tcp://$redis");
        if ($_GET['h'] === 'phpredis_lock') {
            // phpredis 5.3.7's locking, told never to give up (its default is 10 tries 2 ms apart).
            ini_set('redis.session.locking_enabled', '1');
            ini_set('redis.session.lock_retries', '-1');
            ini_set('redis.session.lock_expire', '30');
        }
        break;
    case 'files':
        ini_set('session.save_handler', 'files');
        ini_set('session.save_path', $_SERVER['BENCH_FILES']);
        break;
    default:
        http_response_code(400);
        exit;
}
ini_set('session.use_cookies', '0');
session_id($_GET['sid']);
$started = session_start();
if (($w = (float) ($_GET['work_ms'] ?? 0)) > 0) {
    usleep((int) ($w * 1000));
}
$_SESSION['k' . $_GET['key']] = 1;
$n = count($_SESSION);
session_write_close();
echo json_encode(['started' => $started, 'keys' => $n]);
