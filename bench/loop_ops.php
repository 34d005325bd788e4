<?php
// The lock loops' operations (scenario 4), shared by lock_loop.php (one lib per process),
// paired_loop.php (several, in turn, in one process) and run.php (the floor, medians). Endpoints come from the environment:
// BENCH_REDIS (host:port), BENCH_TLS (host:port) with BENCH_CA (the CA file), BENCH_SEEDS
// (host:port,host:port,... of a cluster).

/** Raw phpredis's unlock, and the floor's: compare the token, then delete. */
const BENCH_CAS = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';

function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2;
}

/** Redis's own CPU time so far (user + system, seconds) from its INFO cpu: getrusage, finer than /proc's ticks. */
function redis_cpu_seconds(string $info): float
{
    preg_match('/used_cpu_sys:([0-9.]+).*used_cpu_user:([0-9.]+)/s', $info, $m);
    return (float) $m[1] + (float) $m[2];
}

/** Requests per second of `redis-benchmark -c 1 -n $n` running $command against $host:$port. */
function redis_benchmark_rps(string $host, string $port, int $n, array $command): float
{
    $cmd = ['redis-benchmark', '-h', $host, '-p', $port, '-c', '1', '-n', (string) $n, '--csv', ...$command];
    $csv = (string) shell_exec(implode(' ', array_map('escapeshellarg', $cmd)));
    // The last line's last seven fields are numbers, rps first (the test name, first, is not escaped).
    $lines = array_values(array_filter(explode("\n", trim($csv))));
    preg_match_all('/"([0-9.]+)"/', (string) end($lines), $m);
    count($m[1]) >= 7 || throw new RuntimeException("redis-benchmark: $csv");
    return (float) $m[1][count($m[1]) - 7];
}

/**
 * The floor, as lock pairs per second: what Redis's own C client gets for a lock pair's two
 * commands (SET NX PX, then a compare-and-delete EVAL), $n of each, one connection, one at a time.
 */
function floor_pairs(string $host, string $port, int $n): float
{
    $set = redis_benchmark_rps($host, $port, $n, ['SET', 'bench:floor', 'v', 'NX', 'PX', '30000']);
    $del = redis_benchmark_rps($host, $port, $n, ['EVAL', BENCH_CAS, '1', 'bench:floor', 'v']);
    return 1 / (1 / $set + 1 / $del);
}

/** phpredis connected to the node (tcp), over TLS, or to the cluster. */
function phpredis(string $where, string $host, string $port, string $ca, array $seeds): Redis|RedisCluster
{
    if ($where === 'cluster') {
        return new RedisCluster(null, $seeds, 1.0, 1.0);
    }
    $r = new Redis();
    if ($where === 'tls') {
        $r->connect("tls://$host", (int) $port, 1.0, null, 0, 1.0, ['stream' => ['cafile' => $ca]]);
    } else {
        $r->connect($host, (int) $port);
    }
    return $r;
}

/**
 * One acquire + release of lib (lease|lease_new|lease_evalsha|phpredis|symfony|symfony_new|
 * symfony_lease|laravel_lease|laravel_redis) at where (tcp|tls|cluster), as a closure.
 */
function loop_op(string $lib, string $where): Closure
{
    // On a cluster every lib's key is in one slot (the lease's lock is lock:{KEY}):
    // the same master serves them all, as one node does elsewhere.
    $key = $where === 'cluster' ? 'bench:loop:cluster' : "bench:loop:$lib:$where";
    $ca = getenv('BENCH_CA') ?: '';
    [$host, $port] = explode(':', (string) getenv($where === 'tls' ? 'BENCH_TLS' : 'BENCH_REDIS')) + ['', ''];
    $seeds = explode(',', getenv('BENCH_SEEDS') ?: '');
    switch ($lib) {
        case 'lease':
        case 'lease_new':
        case 'lease_evalsha':
            $dsn = match ($where) {
                // lease_evalsha: lease_new with its scripts run by EVALSHA instead of as functions.
                'tcp' => "redis://$host:$port" . ($lib === 'lease_evalsha' ? '?functions=0' : ''),
                'tls' => "rediss://$host:$port?cafile=" . rawurlencode($ca),
                'cluster' => 'redis-cluster://' . implode(',', $seeds),
            };
            if ($lib !== 'lease') {
                $op = function () use ($key, $dsn) {
                    $lock = new DistributedLock($key, 30.0, $dsn);
                    $lock->acquire();
                    $lock->release();
                };
                break;
            }
            $lock = new DistributedLock($key, 30.0, $dsn);
            $op = function () use ($lock) { $lock->acquire(); $lock->release(); };
            break;
        case 'phpredis':
            // The userland floor: SET NX PX, then a compare-and-delete script by its SHA.
            $r = phpredis($where, $host, $port, $ca, $seeds);
            $sha = $where === 'cluster' ? $r->script($key, 'load', BENCH_CAS) : $r->script('load', BENCH_CAS);
            $op = function () use ($r, $key, $sha) {
                $token = bin2hex(random_bytes(16));
                $r->set($key, $token, ['nx', 'px' => 30000]);
                $r->evalSha($sha, [$key, $token], 1);
            };
            break;
        case 'symfony':
        case 'symfony_new':
            require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
            $r = phpredis($where, $host, $port, $ca, $seeds);
            $factory = new Symfony\Component\Lock\LockFactory(new Symfony\Component\Lock\Store\RedisStore($r));
            if ($lib === 'symfony_new') {
                $op = function () use ($factory, $key) {
                    $lock = $factory->createLock($key, 30.0);
                    $lock->acquire();
                    $lock->release();
                };
                break;
            }
            $lock = $factory->createLock($key, 30.0);
            $op = function () use ($lock) { $lock->acquire(); $lock->release(); };
            break;
        case 'symfony_lease':
            // Symfony's LockFactory on the bridge's store: a new Lock per lock, as symfony_new.
            require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
            require_once __DIR__ . '/../bridge/autoload.php';
            $factory = new Symfony\Component\Lock\LockFactory(new RedisLease\Bridge\Symfony\LeaseStore("redis://$host:$port"));
            $op = function () use ($factory, $key) {
                $lock = $factory->createLock($key, 30.0);
                $lock->acquire();
                $lock->release();
            };
            break;
        case 'laravel_lease':
        case 'laravel_redis':
            // Cache::lock($key, 30)->get() then release(), as applications write it, on the bridge's
            // redis_lease store or on Laravel's redis store (phpredis).
            require_once 'Illuminate/autoload.php';
            require_once __DIR__ . '/../bridge/autoload.php';
            $store = $lib === 'laravel_lease'
                ? new RedisLease\Bridge\Laravel\LeaseStore("redis://$host:$port")
                : new Illuminate\Cache\RedisStore(new Illuminate\Redis\RedisManager(new Illuminate\Container\Container(), 'phpredis',
                    ['default' => ['host' => $host, 'port' => (int) $port, 'database' => 0]]));
            $op = function () use ($store, $key) {
                $lock = $store->lock($key, 30);
                $lock->get();
                $lock->release();
            };
            break;
    }
    return $op ?? throw new ValueError("unknown lib: $lib");
}

/**
 * Loads the function library of the extension build $so into the Redis on $port (a child PHP takes
 * and releases a lock) and returns the hash its function names end with: the library that was not
 * there before. Null when the build loaded none of its own (the same scripts as one already loaded).
 */
function lease_library(Redis $r, string $so, int $port): ?string
{
    $libraries = function () use ($r): array {
        return array_map(fn (array $lib) => $lib[1], $r->rawCommand('FUNCTION', 'LIST') ?: []); // ['library_name', name, ...]
    };
    $before = $libraries();
    $take = '$l = new DistributedLock("bench:library", 5.0, "redis://127.0.0.1:' . $port . '"); $l->acquire(); $l->release();';
    passthru(implode(' ', array_map('escapeshellarg', [PHP_BINARY, '-n', '-d', "extension=$so", '-r', $take])), $rc);
    $new = array_values(array_diff($libraries(), $before));
    return $rc === 0 && count($new) === 1 ? substr($new[0], strlen('redis_lease_')) : null;
}

/**
 * Redis's own time so far, in µs, in the commands named (INFO commandstats, e.g. ['fcall', 'set']):
 * read before and after a block, the difference is what the block cost inside Redis, not the round trip.
 */
function commands_usec(Redis $r, array $commands): int
{
    $stats = $r->info('commandstats');
    $sum = 0;
    foreach ($commands as $c) {
        preg_match('/usec=(\d+),/', $stats["cmdstat_$c"] ?? '', $m) && $sum += (int) $m[1];
    }
    return $sum;
}

/**
 * Our acquire function as the extension calls it for a lock ($k: the lock key), by raw phpredis; with
 * $permitsOf, for one permit of a semaphore of that many ($k: its base key, '...:semaphore').
 */
function fcall_acquire(Redis $r, string $hash, string $k, string $token, int $waitMs, ?int $permitsOf = null): mixed
{
    $keys = [$k, "$k:fence", "$k:waiters", "$k:terms", "$k:void:$token", "$k:holders"];
    $args = [$token, '30000', (string) $waitMs];
    if ($permitsOf === null) {
        $args[] = 'w';
    } else {
        $keys[] = "$k:weights";
        array_push($args, 'p', (string) $permitsOf, '1');
    }
    return $r->rawCommand('FCALL', "rl_acquire_$hash", count($keys), ...$keys, ...$args);
}

/** Our release function as the extension calls it for a lock or ($permit) a semaphore's permit. */
function fcall_release(Redis $r, string $hash, string $k, string $token, bool $permit = false): mixed
{
    return $r->rawCommand('FCALL', "rl_release_$hash", 6, $k, "$k:fence", "$k:waiters", "$k:terms", "$k:holders",
        "$k:weights", $token, ...($permit ? ['p'] : []));
}
