<?php
/*
 * The redis_lease counters as JSON: 'server' for every worker of this php-fpm
 * master (RedisLease\metrics(server: true)), 'process' for this worker.
 * Histograms are left out; only the counters.
 */
$counters = static fn(array $m): array => array_filter($m, 'is_int');
header('Content-Type: application/json');
echo json_encode([
    'pid' => getmypid(),
    'server' => $counters(RedisLease\metrics(server: true)),
    'process' => $counters(RedisLease\metrics()),
]), "\n";
