--TEST--
Fault: restore(..., autoRenew: true) asks Redis about the hold at once; when that question goes unanswered (and Redis is unreachable right then), restore() throws and the hold is left as it was, its giver's (or the next restore()'s): not released as the failed object goes, nor left to the process's next call to free behind a later restore() of the same token (before the fix, the next claim on that Redis freed it while the second restore() counted on it)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$proxy = FaultProxy::start($srv['port']);
$dsn = $proxy->dsn('connect_timeout=0.5&read_timeout=0.5');

foreach (['lock', 'semaphore'] as $kind) {
    $k = rl_key("restore-$kind");
    $rk = rl_lock_key($k) . ($kind === 'semaphore' ? ':semaphore' : '');
    $make = $kind === 'lock'
        ? static fn() => new DistributedLock($k, 30.0, $dsn)
        : static fn() => new DistributedSemaphore($k, 2, 30.0, $dsn);
    $restore = $kind === 'lock'
        ? static fn(string $t) => DistributedLock::restore($k, $t, 30.0, $dsn, true)
        : static fn(string $t) => DistributedSemaphore::restore($k, 2, $t, 30.0, $dsn, true);
    $held = $kind === 'lock'
        ? static fn(string $t) => str_starts_with((string) $raw->cmd('GET', $rk), "$t:")
        : static fn(string $t) => $raw->cmd('ZSCORE', "$rk:holders", $t) !== null;

    $giver = $make();
    rl_same("$kind: the giver takes it", true, $giver->acquire());
    $token = $giver->detach();

    // The question (inspect.lua on this key) never reaches Redis, and the proxy
    // refuses every connection from then on.
    $proxy->arm('hold', [$rk, rl_script_marker('inspect.lua')], 'down');
    $r = fault_outcome(fn() => $restore($token));
    rl_same("$kind: restore() whose question goes unanswered throws ConnectionException", RedisLease\ConnectionException::class, $r['exception']);
    rl_ok("$kind: ... the question was sent and held by the proxy", $proxy->awaitEvent('hold', 5.0) !== null);
    $proxy->disarm();
    $proxy->up();
    rl_ok("$kind: the token still holds it", $held($token));

    $again = $restore($token);
    rl_same("$kind: restore() again, Redis answering: held", true, $again->isAcquired());
    // The process's next claim there settles whatever it left to settle.
    $other = $kind === 'lock'
        ? new DistributedLock(rl_key("other-$kind"), 30.0, $dsn)
        : new DistributedSemaphore(rl_key("other-$kind"), 2, 30.0, $dsn);
    rl_same("$kind: another claim on that Redis", true, $other->acquire());
    rl_ok("$kind: ... and the token still holds it (nothing freed it behind the second restore())", $held($token));
    rl_same("$kind: the second restore()'s object still holds it", true, $again->isAcquired());
    rl_same("$kind: and releases it", true, $again->release());
    rl_ok("$kind: ... then it is free", !$held($token));
    $other->release();
}
echo "done\n";
?>
--EXPECT--
ok: lock: the giver takes it
ok: lock: restore() whose question goes unanswered throws ConnectionException
ok: lock: ... the question was sent and held by the proxy
ok: lock: the token still holds it
ok: lock: restore() again, Redis answering: held
ok: lock: another claim on that Redis
ok: lock: ... and the token still holds it (nothing freed it behind the second restore())
ok: lock: the second restore()'s object still holds it
ok: lock: and releases it
ok: lock: ... then it is free
ok: semaphore: the giver takes it
ok: semaphore: restore() whose question goes unanswered throws ConnectionException
ok: semaphore: ... the question was sent and held by the proxy
ok: semaphore: the token still holds it
ok: semaphore: restore() again, Redis answering: held
ok: semaphore: another claim on that Redis
ok: semaphore: ... and the token still holds it (nothing freed it behind the second restore())
ok: semaphore: the second restore()'s object still holds it
ok: semaphore: and releases it
ok: semaphore: ... then it is free
done
