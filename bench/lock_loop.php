<?php
// Scenario 4: acquire + release in a loop in one process.
// argv: lib (lease|lease_new|lease_evalsha|phpredis|symfony|symfony_new|symfony_lease|laravel_lease|laravel_redis),
// where (tcp|tls|cluster), n. symfony_lease and the laravel_ libs are the frameworks' own lock APIs, on
// the bridge's stores (bridge/) and on the frameworks' Redis stores (phpredis), tcp only.
// The _new variants make a new lock object for every lock, as applications write it. The endpoints
// come from the environment: BENCH_REDIS (host:port), BENCH_TLS (host:port) with
// BENCH_CA (the CA file), BENCH_SEEDS (host:port,host:port,... of a cluster).
[$_, $lib, $where, $n] = $argv;
$n = (int) $n;
require __DIR__ . '/loop_ops.php';
$op = loop_op($lib, $where);
for ($i = 0; $i < 200; $i++) {
    $op(); // warm-up: connections, script caches
}
$t = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $op();
}
echo json_encode(['ops_per_s' => $n / ((hrtime(true) - $t) / 1e9)]);
