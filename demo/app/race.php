<?php
// One request of the seeds' race: open the session, work, add one key, save.
// ?handler=off|lease|class|files  ?sid=...  ?key=...  ?work_ms=...
$handler = $_GET['handler'] ?? 'lease';
$dsn = getenv('DEMO_REDIS_DSN');
switch ($handler) {
    case 'files':   // PHP's own handler: flock() on a file per session
        ini_set('session.save_handler', 'files');
        ini_set('session.save_path', getenv('DEMO_FILES_DIR'));
        break;
    case 'class':
        session_set_save_handler(new RedisLockingSessionHandler($dsn), true);
        break;
    case 'off':     // redis_lease without locking: last writer wins, like phpredis's default
        ini_set('redis_lease.session.locking', '0');
        // no break
    default:
        ini_set('session.save_handler', 'redis_lease');
        ini_set('session.save_path', $dsn);
}
ini_set('session.use_cookies', '0');
ini_set('session.use_strict_mode', '0');
session_id($_GET['sid']);
$started = session_start();
usleep((int) (1000 * (float) ($_GET['work_ms'] ?? 0)));
$_SESSION['k' . $_GET['key']] = 1;
$written = session_write_close();
header('Content-Type: application/json');
echo json_encode(['started' => $started, 'written' => $written, 'keys' => count($_SESSION ?? [])]);
