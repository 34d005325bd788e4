<?php
// Scenario 4: acquire + release in a loop in one process. argv: lib, port, n.
[$_, $lib, $port, $n] = $argv;
$n = (int) $n;
$key = "bench:loop:$lib";
switch ($lib) {
    case 'lease':
        $lock = new DistributedLock($key, 30.0, "redis://127.0.0.1:$port");
        $op = function () use ($lock) { $lock->acquire(); $lock->release(); };
        break;
    case 'phpredis':
        // The userland floor: SET NX PX, then a compare-and-delete script by its SHA.
        $r = new Redis();
        $r->connect('127.0.0.1', (int) $port);
        $sha = $r->script('load', 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end');
        $op = function () use ($r, $key, $sha) {
            $token = bin2hex(random_bytes(16));
            $r->set($key, $token, ['nx', 'px' => 30000]);
            $r->evalSha($sha, [$key, $token], 1);
        };
        break;
    case 'symfony':
        require '/usr/share/php/Symfony/Component/Lock/autoload.php';
        $r = new Redis();
        $r->connect('127.0.0.1', (int) $port);
        $factory = new Symfony\Component\Lock\LockFactory(new Symfony\Component\Lock\Store\RedisStore($r));
        $lock = $factory->createLock($key, 30.0);
        $op = function () use ($lock) { $lock->acquire(); $lock->release(); };
        break;
}
for ($i = 0; $i < 200; $i++) {
    $op(); // warm-up: connections, script caches
}
$t = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $op();
}
echo json_encode(['ops_per_s' => $n / ((hrtime(true) - $t) / 1e9)]);
