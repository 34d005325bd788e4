--TEST--
Fault: pauses, for a read hold and a semaphore permit. Redis stopped (SIGSTOP): a renewed hold is reported lost no later than its expiry and the holder never blocks (release() false at once, synchronizedRead()/synchronized() throw LockLostException); an acquire that timed out is resolved truthfully after SIGCONT. A php-fpm worker holding one paused (SIGSTOP) past its ttl: a writer / the next permit holder takes over; after SIGCONT the paused one's release returns false and leaves the new holder's hold intact
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/fpm-app/rw_common.inc';

const TTL = 1.0;
const READ_TIMEOUT = 0.5;
const MARGIN = 0.4;
const PAUSED_TTL = 0.5;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
// Renewals: a read timeout longer than the ttl, so the renewer cannot hear back before the lease ends.
$slowDsn = $srv['dsn'] . '?read_timeout=5';
$dsn = $srv['dsn'] . '?connect_timeout=0.5&read_timeout=' . READ_TIMEOUT;

$shapes = [
    'read' => [
        'make' => static fn(string $k, float $ttl, string $dsn, bool $auto = false) => new DistributedLock($k, $ttl, $dsn, $auto),
        'take' => static fn($o) => $o->acquireRead(),
        'sync' => static fn($o, callable $fn) => $o->synchronizedRead($fn),
        'base' => static fn(string $k) => rl_lock_key($k),
    ],
    'permit' => [
        'make' => static fn(string $k, float $ttl, string $dsn, bool $auto = false) => new DistributedSemaphore($k, 2, $ttl, $dsn, $auto),
        'take' => static fn($o) => $o->acquire(),
        'sync' => static fn($o, callable $fn) => $o->synchronized($fn),
        'base' => static fn(string $k) => rl_lock_key($k) . ':semaphore',
    ],
];

/** Waits (bounded) for this process's next renewal: the lease is then a whole ttl. */
function after_renewal(): void
{
    $before = RedisLease\metrics()['auto_renewals'];
    rl_wait_until(static fn() => RedisLease\metrics()['auto_renewals'] > $before, 2 * TTL, 0.002);
}

/** Calls $probe every 2 ms until it returns true; [seconds it took, slowest call]. */
function until(callable $probe, float $limit): array
{
    $t0 = microtime(true);
    $slowest = 0.0;
    while (microtime(true) - $t0 < $limit) {
        $t = microtime(true);
        $done = $probe();
        $slowest = max($slowest, microtime(true) - $t);
        if ($done) {
            break;
        }
        usleep(2000);
    }
    return [microtime(true) - $t0, $slowest];
}

foreach ($shapes as $shape => $s) {
    // R1. Redis stops while a renewed hold is held.
    $o = $s['make'](rl_key("$shape-stalled"), TTL, $slowDsn, true);
    rl_same("$shape: R1: acquired (renewed)", true, $s['take']($o));
    after_renewal();
    rl_ok("$shape: R1: Redis paused", fault_pause($srv['pid']));
    [$took, $slowest] = until(static fn() => $o->getToken() === null, 3 * TTL);
    rl_ok("$shape: R1: the hold is reported lost (getToken() null) no later than its expiry", $took <= TTL + 0.05, sprintf('%.3f s', $took));
    rl_ok("$shape: R1: and not long before it", $took >= TTL / 2, sprintf('%.3f s', $took));
    // Waiting for the renewer would take up to the lease (or the 5 s read timeout);
    // 50 ms leaves room for a descheduled process on a loaded machine (seen: 7 ms).
    rl_ok("$shape: R1: the holder's calls never waited for the renewer (each < 50 ms)", $slowest < 0.05, sprintf('slowest %.4f s', $slowest));
    $t = microtime(true);
    rl_same("$shape: R1: release() reports the loss", false, $o->release());
    rl_ok("$shape: R1: at once, with Redis still stopped (< 50 ms)", microtime(true) - $t < 0.05, sprintf('%.4f s', microtime(true) - $t));
    printf("info: %s: lost %.3f s after Redis stopped (ttl %.1f s); slowest holder call %.2f ms\n", $shape, $took, TTL, $slowest * 1000);
    rl_ok("$shape: R1: Redis resumed", fault_resume($srv['pid']));
    fault_await_late_commands($port);

    // R2. The same inside synchronizedRead() / synchronized().
    $o = $s['make'](rl_key("$shape-stalled-sync"), TTL, $slowDsn, true);
    $ran = false;
    rl_throws("$shape: R2: the synchronized form throws LockLostException when Redis stalls past the lease",
        RedisLease\LockLostException::class, static function () use ($s, $o, $srv, &$ran) {
            $s['sync']($o, static function () use ($o, $srv, &$ran) {
                after_renewal();
                fault_pause($srv['pid']);
                until(static fn() => $o->getToken() === null, 3 * TTL);
                fault_resume($srv['pid']);
                $ran = true;
                return 'result';
            });
        });
    rl_same("$shape: R2: the callback ran to its end", true, $ran);
    fault_await_late_commands($port);

    // R3. The acquire itself while Redis is stopped: it times out; after SIGCONT the
    // late command runs, and the object agrees with whatever it did.
    $k = rl_key("$shape-stop-acquire");
    $base = $s['base']($k);
    $o = $s['make']($k, 5.0, $dsn);
    fault_pause($srv['pid']);
    $t = microtime(true);
    $r = fault_outcome(fn() => $s['take']($o));
    $el = microtime(true) - $t;
    rl_same("$shape: R3: stopped: the acquire throws ConnectionException", 'RedisLease\ConnectionException', $r['exception']);
    rl_ok(sprintf('%s: R3: after the read timeout (%.1f..%.1f s)', $shape, READ_TIMEOUT - 0.1, READ_TIMEOUT + MARGIN),
        $el >= READ_TIMEOUT - 0.1 && $el <= READ_TIMEOUT + MARGIN, sprintf('%.3f s', $el));
    fault_resume($srv['pid']);
    rl_ok("$shape: R3: Redis ran the late commands", fault_await_late_commands($port));
    $inRedis = $raw->cmd('ZRANGE', "$base:holders", 0, -1);
    $held = fault_outcome(fn() => $o->isAcquired());
    rl_same("$shape: R3: resumed: isAcquired() is true exactly when Redis holds a hold for the late acquire",
        count($inRedis) === 1, $held['value'] ?? $held['exception']);
    rl_same("$shape: R3: which is the object's", $inRedis, $held['value'] ? [$o->getToken()] : []);
    printf("info: %s: the late acquire %s\n", $shape, $inRedis ? 'took a hold; the object adopted it' : 'took nothing');
    rl_same("$shape: R3: release() frees it exactly when it was held", $inRedis !== [], $o->release());
    rl_same("$shape: R3: nothing held", [], $raw->cmd('ZRANGE', "$base:holders", 0, -1));
    unset($o);
}

// --- A php-fpm worker paused with SIGSTOP past its hold's ttl ---
$pool = FpmPool::start(['max_children' => 4]);
$client = $pool->client();
$app = __DIR__ . '/fpm-app/rw_app.php';
$hold = static fn(array $q) => FcgiClient::params($app, ['op' => 'hold', 'go_timeout' => 20] + $q,
    ['RL_DSN' => $srv['dsn'], 'RL_CTL_PORT' => (string) $port]);
$cases = [
    // A renewed read hold; a writer waits for the lock.
    'read' => [['shape' => 'read', 'ttl' => PAUSED_TTL, 'auto' => 1], ['shape' => 'write', 'ttl' => 5, 'wait' => 5]],
    // A permit of a semaphore of 1; the next one waits for it.
    'permit' => [['shape' => 'permit', 'limit' => 1, 'ttl' => PAUSED_TTL], ['shape' => 'permit', 'limit' => 1, 'ttl' => 5, 'wait' => 5]],
];
foreach ($cases as $shape => [$paused, $next]) {
    $k = rl_key("$shape-paused");
    $base = $shape === 'permit' ? rl_lock_key($k) . ':semaphore' : rl_lock_key($k);
    $ctlA = rl_key('ctl-a');
    $ctlB = rl_key('ctl-b');
    $a = $client->begin($hold(['key' => $k, 'ctl' => $ctlA] + $paused));
    rl_ok("$shape: P: A holds it", rw_wait(static fn() => $raw->cmd('EXISTS', "$ctlA:started") === 1, 5.0, [$a]));
    $tokenA = $raw->cmd('GET', "$ctlA:token");
    $pidA = (int) $raw->cmd('GET', "$ctlA:started");
    rl_same("$shape: P: A's hold is in Redis", [$tokenA], $raw->cmd('ZRANGE', "$base:holders", 0, -1));
    rl_ok("$shape: P: A's worker is stopped (SIGSTOP)", fault_pause($pidA));
    $tPause = microtime(true);
    $b = $client->begin($hold(['key' => $k, 'ctl' => $ctlB] + $next));
    rl_ok("$shape: P: B takes over while A is stopped",
        rw_wait(static fn() => $raw->cmd('EXISTS', "$ctlB:started") === 1, PAUSED_TTL + 3.0, [$a, $b]) && fault_proc_state($pidA) === 'T');
    $took = microtime(true) - $tPause;
    rl_ok(sprintf('%s: P: within A\'s ttl + %.1f s of the pause', $shape, MARGIN), $took <= PAUSED_TTL + MARGIN, sprintf('%.3f s', $took));
    $tokenB = $raw->cmd('GET', "$ctlB:token");
    $heldB = static fn() => $shape === 'permit' ? $raw->cmd('ZRANGE', "$base:holders", 0, -1)
        : [strstr((string) $raw->cmd('GET', $base), ':', true), $raw->cmd('ZRANGE', "$base:holders", 0, -1)];
    $expectB = $shape === 'permit' ? [$tokenB] : [$tokenB, []];
    rl_same("$shape: P: B holds it, A holds nothing", $expectB, $heldB());
    // A wakes up with its go signal already there, and releases.
    $raw->cmd('SET', "$ctlA:go", '1');
    rl_ok("$shape: P: A's worker resumed (SIGCONT)", fault_resume($pidA));
    rw_wait(static fn() => $a->done, 10.0, [$a, $b]);
    $ja = $a->response->json() ?? ['errors' => [$a->response->describe()]];
    rl_same("$shape: P: A had it, and its late release returns false", [true, false], [$ja['acquired'] ?? null, $ja['released'] ?? null]);
    rl_same("$shape: P: B's hold is intact after A's release", $expectB, $heldB());
    $raw->cmd('SET', "$ctlB:go", '1');
    FcgiClient::await([$b], 10.0);
    $jb = $b->response->json() ?? ['errors' => [$b->response->describe()]];
    rl_same("$shape: P: B released it (true)", [true, true, []], [$jb['acquired'] ?? null, $jb['released'] ?? null, $jb['errors'] ?? null]);
    // (A writer's fencing counter is kept an hour by design.)
    rl_same("$shape: P: nothing left but the fencing counter", [], array_values(array_filter($raw->cmd('KEYS', "$base*"),
        static fn($x) => !str_contains($x, ':void:') && !str_ends_with($x, ':fence'))));
    printf("info: %s: the paused holder's hold (ttl %.1f s) was taken over %.3f s after the pause\n", $shape, PAUSED_TTL, $took);
}
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: read: R1: acquired (renewed)
ok: read: R1: Redis paused
ok: read: R1: the hold is reported lost (getToken() null) no later than its expiry
ok: read: R1: and not long before it
ok: read: R1: the holder's calls never waited for the renewer (each < 50 ms)
ok: read: R1: release() reports the loss
ok: read: R1: at once, with Redis still stopped (< 50 ms)
info: read: lost %f s after Redis stopped (ttl 1.0 s); slowest holder call %f ms
ok: read: R1: Redis resumed
ok: read: R2: the synchronized form throws LockLostException when Redis stalls past the lease
ok: read: R2: the callback ran to its end
ok: read: R3: stopped: the acquire throws ConnectionException
ok: read: R3: after the read timeout (0.4..0.9 s)
ok: read: R3: Redis ran the late commands
ok: read: R3: resumed: isAcquired() is true exactly when Redis holds a hold for the late acquire
ok: read: R3: which is the object's
info: read: the late acquire %s
ok: read: R3: release() frees it exactly when it was held
ok: read: R3: nothing held
ok: permit: R1: acquired (renewed)
ok: permit: R1: Redis paused
ok: permit: R1: the hold is reported lost (getToken() null) no later than its expiry
ok: permit: R1: and not long before it
ok: permit: R1: the holder's calls never waited for the renewer (each < 50 ms)
ok: permit: R1: release() reports the loss
ok: permit: R1: at once, with Redis still stopped (< 50 ms)
info: permit: lost %f s after Redis stopped (ttl 1.0 s); slowest holder call %f ms
ok: permit: R1: Redis resumed
ok: permit: R2: the synchronized form throws LockLostException when Redis stalls past the lease
ok: permit: R2: the callback ran to its end
ok: permit: R3: stopped: the acquire throws ConnectionException
ok: permit: R3: after the read timeout (0.4..0.9 s)
ok: permit: R3: Redis ran the late commands
ok: permit: R3: resumed: isAcquired() is true exactly when Redis holds a hold for the late acquire
ok: permit: R3: which is the object's
info: permit: the late acquire %s
ok: permit: R3: release() frees it exactly when it was held
ok: permit: R3: nothing held
ok: read: P: A holds it
ok: read: P: A's hold is in Redis
ok: read: P: A's worker is stopped (SIGSTOP)
ok: read: P: B takes over while A is stopped
ok: read: P: within A's ttl + 0.4 s of the pause
ok: read: P: B holds it, A holds nothing
ok: read: P: A's worker resumed (SIGCONT)
ok: read: P: A had it, and its late release returns false
ok: read: P: B's hold is intact after A's release
ok: read: P: B released it (true)
ok: read: P: nothing left but the fencing counter
info: read: the paused holder's hold (ttl 0.5 s) was taken over %f s after the pause
ok: permit: P: A holds it
ok: permit: P: A's hold is in Redis
ok: permit: P: A's worker is stopped (SIGSTOP)
ok: permit: P: B takes over while A is stopped
ok: permit: P: within A's ttl + 0.4 s of the pause
ok: permit: P: B holds it, A holds nothing
ok: permit: P: A's worker resumed (SIGCONT)
ok: permit: P: A had it, and its late release returns false
ok: permit: P: B's hold is intact after A's release
ok: permit: P: B released it (true)
ok: permit: P: nothing left but the fencing counter
info: permit: the paused holder's hold (ttl 0.5 s) was taken over %f s after the pause
done
