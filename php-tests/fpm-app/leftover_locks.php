<?php
/*
 * leftover_locks.php?n=N&prefix=P: acquires N locks P0..P(N-1) (ttl 30 s) and
 * ends the request still holding them (in a global array, released by the
 * request's end); with gate=FILE it first waits (up to 10 s) for FILE to exist.
 * With n=0 it takes and releases one lock P-next: an ordinary
 * call, which settles what an earlier request of this worker left to settle.
 * DSN: $_SERVER['RL_DSN']. Replies with JSON: pid, acquired, next.
 */
require __DIR__ . '/common.inc';

$dsn = $_SERVER['RL_DSN'];
$prefix = (string) app_param('prefix', 'leftover');
$n = (int) app_param('n', '0');
$GLOBALS['locks'] = [];
$acquired = 0;
for ($i = 0; $i < $n; $i++) {
    $l = new DistributedLock($prefix . $i, 30.0, $dsn);
    $acquired += $l->acquire() ? 1 : 0;
    $GLOBALS['locks'][] = $l;
}
$gate = (string) app_param('gate', '');
$until = microtime(true) + 10.0;
while ($gate !== '' && !file_exists($gate) && microtime(true) < $until) {
    usleep(2000);
}
$next = null;
if ($n === 0) {
    $l = new DistributedLock($prefix . '-next', 30.0, $dsn);
    $next = $l->acquire() && $l->release();
}
echo json_encode(['pid' => getmypid(), 'acquired' => $acquired, 'next' => $next]);
