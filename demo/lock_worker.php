<?php
// One contending process: takes the lock $rounds times, works $workMs inside,
// and prints one JSON line per hold.
[$_, $dsn, $id, $rounds, $workMs] = $argv;
$lock = new DistributedLock('demo:report', ttl: 5.0, dsn: $dsn);
for ($i = 0; $i < (int) $rounds; $i++) {
    $asked = microtime(true);
    if (!$lock->acquire(wait: 10.0)) {
        fwrite(STDERR, "worker $id: not acquired within 10 s\n");
        exit(1);
    }
    $got = microtime(true);
    $fence = $lock->getFencingToken();
    usleep((int) ($workMs * 1000));
    $releasing = microtime(true);
    $lock->release();
    echo json_encode(['worker' => (int) $id, 'asked' => $asked, 'got' => $got, 'released' => $releasing, 'fence' => $fence]), "\n";
}
