<?php
/*
 * One request of scripts/soak.sh: a native redis_lease session (its counter
 * goes up by one; renewed, the default) and an auto-renewed DistributedLock
 * acquire/release. The pool's php.ini
 * sets session.save_handler = redis_lease and the DSNs.
 *
 *   soak.php?sid=ID&key=NAME
 *
 * Replies with JSON: ok, n (the session's counter after this request), pid.
 */
header('Content-Type: application/json');
$sid = (string) ($_GET['sid'] ?? '');
$key = (string) ($_GET['key'] ?? 'soak');
$fail = static function (string $what): never {
    http_response_code(500);
    echo json_encode(['ok' => false, 'error' => $what, 'pid' => getmypid()]), "\n";
    exit;
};

session_id($sid);
if (!session_start()) {
    $fail('session_start() failed');
}
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
$n = $_SESSION['n'];
if (!session_write_close()) {
    $fail('session_write_close() failed');
}

// The ini DSN (redis_lease.dsn); a short wait: other requests use the same keys.
// A short renewed lease; one request in 500 holds it for longer than its ttl, so
// that the workers' renewal threads work throughout the run.
$lock = new DistributedLock($key, 0.3, null, autoRenew: true);
if (!$lock->acquire(5.0)) {
    $fail('lock busy after 5 s');
}
if (random_int(1, 500) === 1) {
    usleep(400000);
}
if (!is_int($lock->getFencingToken())) {
    $fail('no fencing token');
}
if (!$lock->release()) {
    $fail('release() false');
}
echo json_encode(['ok' => true, 'n' => $n, 'pid' => getmypid()]), "\n";
