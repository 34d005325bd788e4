--TEST--
RedisLease exceptions: hierarchy, constructible and subclassable from PHP; DistributedLock is final; metrics() shape
--FILE--
<?php
$classes = [
    'RedisLease\LeaseException' => RuntimeException::class,
    'RedisLease\ConnectionException' => 'RedisLease\LeaseException',
    'RedisLease\LockTimeoutException' => 'RedisLease\LeaseException',
    'RedisLease\LockLostException' => 'RedisLease\LeaseException',
];
foreach ($classes as $class => $parent) {
    if (!class_exists($class)) {
        echo "FAIL: $class does not exist\n";
        continue;
    }
    $rc = new ReflectionClass($class);
    echo ($rc->getName() === $class ? 'ok' : 'FAIL') . ": $class has that exact name (" . $rc->getName() . ")\n";
    echo ($rc->getParentClass() && $rc->getParentClass()->getName() === $parent ? 'ok' : 'FAIL')
        . ": $class extends $parent (actual: " . ($rc->getParentClass() ? $rc->getParentClass()->getName() : 'none') . ")\n";
    echo (!$rc->isFinal() && !$rc->isAbstract() ? 'ok' : 'FAIL') . ": $class is neither final nor abstract\n";

    // Constructible with the normal Exception constructor.
    $prev = new Exception('prev');
    $e = new $class('msg for ' . $class, 42, $prev); $line = __LINE__;
    $ok = $e->getMessage() === 'msg for ' . $class && $e->getCode() === 42 && $e->getPrevious() === $prev
        && $e instanceof RuntimeException && $e instanceof Exception && $e instanceof Throwable
        && $e->getLine() === $line && $e->getFile() === __FILE__;
    echo ($ok ? 'ok' : 'FAIL') . ": new $class(msg, code, previous) behaves like an Exception\n";
    $e = new $class();
    echo ($e->getMessage() === '' && $e->getCode() === 0 ? 'ok' : 'FAIL') . ": new $class() with defaults\n";

    // Throw and catch by the base class.
    try {
        throw new $class('thrown');
    } catch (RedisLease\LeaseException $c) {
        echo (get_class($c) === $class ? 'ok' : 'FAIL') . ": $class caught as LeaseException\n";
    }
}

// Subclassing from PHP.
class AppLockLost extends RedisLease\LockLostException
{
    public function __construct(public readonly string $resource)
    {
        parent::__construct("lost $resource", 7);
    }
}
$e = new AppLockLost('orders');
echo ($e instanceof RedisLease\LockLostException && $e instanceof RedisLease\LeaseException
    && $e->getMessage() === 'lost orders' && $e->getCode() === 7 && $e->resource === 'orders' ? 'ok' : 'FAIL')
    . ": user subclass of LockLostException works\n";
class AppLeaseError extends RedisLease\LeaseException {}
echo ((new AppLeaseError('x')) instanceof RuntimeException ? 'ok' : 'FAIL') . ": user subclass of LeaseException works\n";
try {
    throw new AppLeaseError('custom');
} catch (RedisLease\LeaseException $c) {
    echo ($c->getMessage() === 'custom' ? 'ok' : 'FAIL') . ": user subclass caught as LeaseException\n";
}

// Exceptions are distinct (no accidental aliasing).
echo (!(new RedisLease\ConnectionException()) instanceof RedisLease\LockTimeoutException
    && !(new RedisLease\LockLostException()) instanceof RedisLease\ConnectionException ? 'ok' : 'FAIL')
    . ": sibling exceptions are distinct classes\n";

// DistributedLock
$rc = new ReflectionClass('DistributedLock');
echo ($rc->isFinal() ? 'ok' : 'FAIL') . ": DistributedLock is final\n";
echo ($rc->getNamespaceName() === '' ? 'ok' : 'FAIL') . ": DistributedLock is in the global namespace\n";
$expected = ['__construct', 'acquire', 'release', 'refresh', 'isAcquired', 'getRemainingLifetime',
    'getFencingToken', 'synchronized', 'getKey'];
$actual = array_map(fn($m) => $m->getName(), $rc->getMethods(ReflectionMethod::IS_PUBLIC));
$missing = array_diff($expected, $actual);
echo ($missing === [] ? 'ok' : 'FAIL') . ": DistributedLock has all public methods" . ($missing ? ' (missing: ' . implode(', ', $missing) . ')' : '') . "\n";

// metrics()
echo (function_exists('RedisLease\metrics') ? 'ok' : 'FAIL') . ": RedisLease\\metrics() exists\n";
$m = RedisLease\metrics();
// The counters documented in the stub.
$keys = ['lock_acquired', 'lock_contended', 'lock_busy', 'lock_released', 'lock_lost', 'lock_renewals',
    'wakeups', 'connects', 'connection_errors', 'retries', 'uncertain_resolved'];
$bad = [];
foreach ($keys as $key) {
    if (!array_key_exists($key, $m) || !is_int($m[$key]) || $m[$key] < 0) {
        $bad[] = $key . '=' . var_export($m[$key] ?? null, true);
    }
}
echo ($bad === [] ? 'ok' : 'FAIL') . ": metrics() has non-negative int counters" . ($bad ? ' (bad: ' . implode(', ', $bad) . ')' : '') . "\n";
$hist = array_filter(['lock_wait_seconds', 'lock_hold_seconds'],
    fn($h) => !is_array($m[$h] ?? null) || ($m[$h]['count'] ?? null) !== 0 || !is_array($m[$h]['buckets'] ?? null));
echo ($hist === [] ? 'ok' : 'FAIL') . ": metrics() has empty histograms lock_wait_seconds and lock_hold_seconds\n";
echo (($m['lock_acquired'] ?? null) === 0 ? 'ok' : 'FAIL') . ": fresh process has lock_acquired == 0\n";
echo "done\n";
?>
--EXPECT--
ok: RedisLease\LeaseException has that exact name (RedisLease\LeaseException)
ok: RedisLease\LeaseException extends RuntimeException (actual: RuntimeException)
ok: RedisLease\LeaseException is neither final nor abstract
ok: new RedisLease\LeaseException(msg, code, previous) behaves like an Exception
ok: new RedisLease\LeaseException() with defaults
ok: RedisLease\LeaseException caught as LeaseException
ok: RedisLease\ConnectionException has that exact name (RedisLease\ConnectionException)
ok: RedisLease\ConnectionException extends RedisLease\LeaseException (actual: RedisLease\LeaseException)
ok: RedisLease\ConnectionException is neither final nor abstract
ok: new RedisLease\ConnectionException(msg, code, previous) behaves like an Exception
ok: new RedisLease\ConnectionException() with defaults
ok: RedisLease\ConnectionException caught as LeaseException
ok: RedisLease\LockTimeoutException has that exact name (RedisLease\LockTimeoutException)
ok: RedisLease\LockTimeoutException extends RedisLease\LeaseException (actual: RedisLease\LeaseException)
ok: RedisLease\LockTimeoutException is neither final nor abstract
ok: new RedisLease\LockTimeoutException(msg, code, previous) behaves like an Exception
ok: new RedisLease\LockTimeoutException() with defaults
ok: RedisLease\LockTimeoutException caught as LeaseException
ok: RedisLease\LockLostException has that exact name (RedisLease\LockLostException)
ok: RedisLease\LockLostException extends RedisLease\LeaseException (actual: RedisLease\LeaseException)
ok: RedisLease\LockLostException is neither final nor abstract
ok: new RedisLease\LockLostException(msg, code, previous) behaves like an Exception
ok: new RedisLease\LockLostException() with defaults
ok: RedisLease\LockLostException caught as LeaseException
ok: user subclass of LockLostException works
ok: user subclass of LeaseException works
ok: user subclass caught as LeaseException
ok: sibling exceptions are distinct classes
ok: DistributedLock is final
ok: DistributedLock is in the global namespace
ok: DistributedLock has all public methods
ok: RedisLease\metrics() exists
ok: metrics() has non-negative int counters
ok: metrics() has empty histograms lock_wait_seconds and lock_hold_seconds
ok: fresh process has lock_acquired == 0
done
