<?php
// One session request for the benchmarks:
// ?h=lease|lease_norenew|lease_tls|lease_cluster|phpredis|phpredis_lock|phpredis_lock_tls|files
// &sid=..&key=..&work_ms=..  Adds one key after the work and reports the key count.
$redis = $_SERVER['BENCH_REDIS'];              // host:port
// The same save_path for both extensions: phpredis's forms, which redis_lease reads too.
$tls = 'tls://' . $_SERVER['BENCH_TLS'] . '?stream[cafile]=' . $_SERVER['BENCH_CA']; // a plain path: phpredis does not decode it
$seeds = implode('&', array_map(fn ($s) => "seed[]=$s", explode(',', $_SERVER['BENCH_SEEDS'])));
switch ($_GET['h']) {
    case 'lease':
    case 'lease_norenew':
    case 'lease_tls':
    case 'lease_cluster':
        ini_set('session.save_handler', 'redis_lease');
        // lease_norenew: the session lock is not renewed (a 30 s lease instead of a renewed 10 s one).
        ini_set('redis_lease.session.lock_renew', $_GET['h'] === 'lease_norenew' ? '0' : '1');
        ini_set('session.save_path', match ($_GET['h']) {
            'lease', 'lease_norenew' => "tcp://$redis", 'lease_tls' => $tls, 'lease_cluster' => $seeds });
        break;
    case 'phpredis':
    case 'phpredis_lock':
    case 'phpredis_lock_tls':
        ini_set('session.save_handler', 'redis');
        ini_set('session.save_path', $_GET['h'] === 'phpredis_lock_tls' ? $tls : "tcp://$redis");
        if ($_GET['h'] !== 'phpredis') {
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
