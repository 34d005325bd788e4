<?php
// Takes and releases one auto-renewed lock on each of 16 databases (16 DSNs),
// then reports this worker's pid.
$locks = [];
for ($db = 0; $db < 16; $db++) {
    $lock = new DistributedLock('fpm-idle', 0.6, $_SERVER['RL_DSN'] . "/$db", autoRenew: true);
    if (!$lock->acquire(1.0)) {
        http_response_code(500);
        exit("db $db busy");
    }
    $locks[] = $lock;
}
// Long enough for a renewal (every ttl/3) of each.
usleep(300000);
$ok = true;
foreach ($locks as $lock) {
    $ok = $lock->release() && $ok;
}
header('Content-Type: application/json');
echo json_encode(['ok' => $ok, 'pid' => getmypid()]);
