--TEST--
Fault: a request that ends holding many locks while Redis does not answer waits one read timeout in all, not one per lock; what it could not release is freed by the worker's next request once Redis answers (CLI and php-fpm)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const LOCKS = 6;
const READ_TIMEOUT = 0.5;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'] . '?connect_timeout=0.5&read_timeout=' . READ_TIMEOUT;

/** How many of the locks prefix0..prefix(N-1) exist in Redis. */
function held(RlRaw $raw, string $prefix): int
{
    $n = 0;
    for ($i = 0; $i < LOCKS; $i++) {
        $n += $raw->cmd('EXISTS', rl_lock_key($prefix . $i));
    }
    return $n;
}

// CLI: the script ends with the locks held in globals; Redis is stopped.
$prefix = rl_key('cli');
$child = rl_spawn_php('
$locks = [];
for ($i = 0; $i < ' . LOCKS . '; $i++) {
    $l = new DistributedLock(' . rl_export($prefix) . ' . $i, 30.0, ' . rl_export($dsn) . ');
    $l->acquire();
    $locks[] = $l;
}
echo "held\n";
fgets(STDIN);
');
rl_same('CLI: the child holds its locks', 'held', $child->readLine(10.0));
rl_same('CLI: ... all of them, in Redis', LOCKS, held($raw, $prefix));
rl_ok('CLI: Redis stopped', fault_pause($srv['pid']));
$t0 = microtime(true);
$child->send("end\n");
$child->wait(30.0);
$took = microtime(true) - $t0;
rl_ok('CLI: the request ended within about one read timeout (not ' . LOCKS . ')', $took < 2.5 * READ_TIMEOUT,
    sprintf('%.2f s', $took));
rl_ok('CLI: Redis resumed', fault_resume($srv['pid']));
fault_await_late_commands($srv['port']);

// php-fpm: one worker; its next request settles what the first one left.
$pool = FpmPool::start(['max_children' => 1]);
$prefix = rl_key('fpm');
$req = fn(int $n) => $pool->client()->request(FcgiClient::params(ST_APP . '/leftover_locks.php',
    ['n' => $n, 'prefix' => $prefix], ['RL_DSN' => $dsn]), '', 30.0);
$r = $req(0);
rl_same('fpm: warm-up request', true, $r->json()['next'] ?? null);
// The request takes its locks, then waits for the gate file before it ends:
// Redis is stopped in between.
$gate = rl_tempfile('.gate');
unlink($gate);
$call = $pool->client()->begin(FcgiClient::params(ST_APP . '/leftover_locks.php',
    ['n' => LOCKS, 'prefix' => $prefix, 'gate' => $gate], ['RL_DSN' => $dsn]));
rl_ok('fpm: the request took its locks', st_wait(fn() => held($raw, $prefix) === LOCKS, 10.0, [$call]));
rl_ok('fpm: Redis stopped', fault_pause($srv['pid']));
$t0 = microtime(true);
touch($gate);
st_wait(fn() => $call->done, 30.0, [$call]);
$took = microtime(true) - $t0;
rl_same('fpm: the request answered', LOCKS, $call->response->json()['acquired'] ?? null);
rl_ok('fpm: ... and ended within about one read timeout', $took < 2.5 * READ_TIMEOUT, sprintf('%.2f s', $took));
rl_ok('fpm: Redis resumed', fault_resume($srv['pid']));
fault_await_late_commands($srv['port']);
rl_ok('fpm: some locks are still held (their releases were left for later)', held($raw, $prefix) > 0,
    (string) held($raw, $prefix));
$r = $req(0);
rl_same('fpm: the next request of the worker', true, $r->json()['next'] ?? null);
rl_same('fpm: ... freed every lock left over', 0, held($raw, $prefix));
echo "done\n";
?>
--EXPECT--
ok: CLI: the child holds its locks
ok: CLI: ... all of them, in Redis
ok: CLI: Redis stopped
ok: CLI: the request ended within about one read timeout (not 6)
ok: CLI: Redis resumed
ok: fpm: warm-up request
ok: fpm: the request took its locks
ok: fpm: Redis stopped
ok: fpm: the request answered
ok: fpm: ... and ended within about one read timeout
ok: fpm: Redis resumed
ok: fpm: some locks are still held (their releases were left for later)
ok: fpm: the next request of the worker
ok: fpm: ... freed every lock left over
done
