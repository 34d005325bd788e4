--TEST--
Secrets: a DSN or save path never appears in exception traces (every parameter that may carry one is #[\SensitiveParameter]); a bare or empty boolean DSN option (verify_peer, verify_peer_name, stream[...]) is a ValueError naming the option, never a TLS check turned off
--INI--
zend.exception_ignore_args=0
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

const SECRET = 'S3cretPassw0rd';

/** Everything a trace shows: getTraceAsString(), and the arguments in getTrace(). */
function trace_text(Throwable $e): string
{
    return $e->getTraceAsString() . "\n" . var_export($e->getTrace(), true);
}

$calls = [
    'DistributedLock::__construct' => fn() => new DistributedLock('k', 1.0, 'redis://app:' . SECRET . '@127.0.0.1:1/?timeout=zz'),
    'DistributedLock::__construct (password-only userinfo)' => fn() => new DistributedLock('k', 1.0, 'redis://' . SECRET . '@127.0.0.1:1?timeout=zz'),
    'DistributedLock::isLocked' => fn() => DistributedLock::isLocked('k', 'redis://app:' . SECRET . '@127.0.0.1:1/?timeout=zz'),
    'DistributedLock::restore' => fn() => DistributedLock::restore('k', SECRET, 1.0, 'redis://127.0.0.1:1/?timeout=zz'),
    'RedisLockingSessionHandler::__construct' => fn() => new RedisLockingSessionHandler('tcp://127.0.0.1:1?auth=' . SECRET . '&timeout=zz'),
    'RedisLease\\inspect' => fn() => RedisLease\inspect('k', 'lock', 'redis://app:' . SECRET . '@127.0.0.1:1/?timeout=zz'),
    'RedisLease\\inspect (a session id)' => fn() => RedisLease\inspect(SECRET, 'session', 'redis://127.0.0.1:1/?timeout=zz'),
    'RedisLease\\leases' => fn() => RedisLease\leases(null, 'redis://app:' . SECRET . '@127.0.0.1:1/?timeout=zz'),
    // A framework turns the handler's warning into an exception: the session's
    // id and data are in its trace.
    'RedisLockingSessionHandler::write' => function () {
        $h = new RedisLockingSessionHandler('tcp://127.0.0.1:1?timeout=0.2&read_timeout=0.2');
        set_error_handler(fn(int $no, string $msg) => throw new ErrorException($msg, 0, $no));
        try {
            $h->write(SECRET, 'user|s:14:"' . SECRET . '";');
        } finally {
            restore_error_handler();
        }
    },
];
foreach ($calls as $what => $call) {
    try {
        $call();
        rl_ok("$what threw", false);
    } catch (Throwable $e) {
        rl_ok("$what: no password in the trace", !str_contains(trace_text($e), SECRET), trace_text($e));
        rl_ok("$what: no password in the message", !str_contains($e->getMessage(), SECRET), $e->getMessage());
    }
}
// The attribute itself, as reflection (IDEs, static analysis) sees it, on every
// parameter of the extension that may carry a secret (a DSN, a save path, a
// token that releases a lock); found by name, so a new method cannot miss it.
// open() takes the save path (it may carry a password) but ignores it, so it
// never throws with it in a frame.
// A session's id (as good as its cookie) and data, where the session handler or
// inspect() takes them, too.
$checked = [];
$check = function (string $where, ReflectionFunctionAbstract $f, array $names) use (&$checked) {
    foreach ($f->getParameters() as $p) {
        if (in_array($p->getName(), $names, true)) {
            $checked["$where(\${$p->getName()})"] = array_map(fn($a) => $a->getName(), $p->getAttributes());
        }
    }
};
$ext = new ReflectionExtension('redis_lease');
foreach ($ext->getClasses() as $class) {
    $session = $class->getName() === 'RedisLockingSessionHandler';
    foreach ($class->getMethods() as $method) {
        $check("{$class->getName()}::{$method->getName()}", $method, $session ? ['dsn', 'path', 'token', 'id', 'data'] : ['dsn', 'path', 'token']);
    }
}
foreach ($ext->getFunctions() as $function) {
    $check($function->getName(), $function, $function->getName() === 'RedisLease\\inspect' ? ['dsn', 'key'] : ['dsn', 'path', 'token']);
}
ksort($checked);
foreach ($checked as $what => $names) {
    rl_same("$what is #[\\SensitiveParameter]", ['SensitiveParameter'], $names);
}
$found = count($checked);
rl_ok('parameters checked', $found >= 20, (string) $found);

// An unset template variable must not turn TLS verification off.
foreach ([
    'rediss://127.0.0.1:1?verify_peer' => 'verify_peer',
    'rediss://127.0.0.1:1?verify_peer=' => 'verify_peer',
    'rediss://127.0.0.1:1?verify_peer_name' => 'verify_peer_name',
    'rediss://127.0.0.1:1?verify_peer_name=' => 'verify_peer_name',
    'tls://127.0.0.1:1?stream[verify_peer]=' => 'stream[verify_peer]',
    'tls://127.0.0.1:1?stream[verify_peer_name]' => 'stream[verify_peer_name]',
    'rediss-sentinel://127.0.0.1:1/svc?verify_peer' => 'verify_peer',
    'rediss-cluster://127.0.0.1:1?verify_peer_name=' => 'verify_peer_name',
] as $dsn => $option) {
    foreach (['lock' => fn() => new DistributedLock('k', 1.0, $dsn), 'session' => fn() => new RedisLockingSessionHandler($dsn)] as $form => $make) {
        try {
            $make();
            rl_ok("$dsn ($form): refused", false);
        } catch (ValueError $e) {
            rl_ok("$dsn ($form): a ValueError naming '$option'", str_contains($e->getMessage(), "'$option'"), $e->getMessage());
        }
    }
}
// Explicit opt-outs still work (they are parsed, not refused).
foreach (['rediss://127.0.0.1:1?verify_peer=0', 'rediss://127.0.0.1:1?verify_peer_name=0', 'tls://127.0.0.1:1?stream[verify_peer]=0'] as $dsn) {
    try {
        new DistributedLock('k', 1.0, $dsn);
        rl_ok("$dsn is accepted", true);
    } catch (Throwable $e) {
        rl_ok("$dsn is accepted", false, $e->getMessage());
    }
}
echo "done\n";
?>
--EXPECTF--
ok: DistributedLock::__construct: no password in the trace
ok: DistributedLock::__construct: no password in the message
ok: DistributedLock::__construct (password-only userinfo): no password in the trace
ok: DistributedLock::__construct (password-only userinfo): no password in the message
ok: DistributedLock::isLocked: no password in the trace
ok: DistributedLock::isLocked: no password in the message
ok: DistributedLock::restore: no password in the trace
ok: DistributedLock::restore: no password in the message
ok: RedisLockingSessionHandler::__construct: no password in the trace
ok: RedisLockingSessionHandler::__construct: no password in the message
ok: RedisLease\inspect: no password in the trace
ok: RedisLease\inspect: no password in the message
ok: RedisLease\inspect (a session id): no password in the trace
ok: RedisLease\inspect (a session id): no password in the message
ok: RedisLease\leases: no password in the trace
ok: RedisLease\leases: no password in the message
ok: RedisLockingSessionHandler::write: no password in the trace
ok: RedisLockingSessionHandler::write: no password in the message
ok: DistributedLock::__construct($dsn) is #[\SensitiveParameter]
ok: DistributedLock::forceRelease($dsn) is #[\SensitiveParameter]
ok: DistributedLock::isLocked($dsn) is #[\SensitiveParameter]
ok: DistributedLock::restore($dsn) is #[\SensitiveParameter]
ok: DistributedLock::restore($token) is #[\SensitiveParameter]
ok: DistributedLock::server($dsn) is #[\SensitiveParameter]
ok: DistributedSemaphore::__construct($dsn) is #[\SensitiveParameter]
ok: DistributedSemaphore::restore($dsn) is #[\SensitiveParameter]
ok: DistributedSemaphore::restore($token) is #[\SensitiveParameter]
ok: RedisLease\inspect($dsn) is #[\SensitiveParameter]
ok: RedisLease\inspect($key) is #[\SensitiveParameter]
ok: RedisLease\leases($dsn) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::__construct($dsn) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::destroy($id) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::open($path) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::read($id) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::updateTimestamp($data) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::updateTimestamp($id) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::validateId($id) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::write($data) is #[\SensitiveParameter]
ok: RedisLockingSessionHandler::write($id) is #[\SensitiveParameter]
ok: parameters checked
ok: rediss://127.0.0.1:1?verify_peer (lock): a ValueError naming 'verify_peer'
ok: rediss://127.0.0.1:1?verify_peer (session): a ValueError naming 'verify_peer'
ok: rediss://127.0.0.1:1?verify_peer= (lock): a ValueError naming 'verify_peer'
ok: rediss://127.0.0.1:1?verify_peer= (session): a ValueError naming 'verify_peer'
ok: rediss://127.0.0.1:1?verify_peer_name (lock): a ValueError naming 'verify_peer_name'
ok: rediss://127.0.0.1:1?verify_peer_name (session): a ValueError naming 'verify_peer_name'
ok: rediss://127.0.0.1:1?verify_peer_name= (lock): a ValueError naming 'verify_peer_name'
ok: rediss://127.0.0.1:1?verify_peer_name= (session): a ValueError naming 'verify_peer_name'
ok: tls://127.0.0.1:1?stream[verify_peer]= (lock): a ValueError naming 'stream[verify_peer]'
ok: tls://127.0.0.1:1?stream[verify_peer]= (session): a ValueError naming 'stream[verify_peer]'
ok: tls://127.0.0.1:1?stream[verify_peer_name] (lock): a ValueError naming 'stream[verify_peer_name]'
ok: tls://127.0.0.1:1?stream[verify_peer_name] (session): a ValueError naming 'stream[verify_peer_name]'
ok: rediss-sentinel://127.0.0.1:1/svc?verify_peer (lock): a ValueError naming 'verify_peer'
ok: rediss-sentinel://127.0.0.1:1/svc?verify_peer (session): a ValueError naming 'verify_peer'
ok: rediss-cluster://127.0.0.1:1?verify_peer_name= (lock): a ValueError naming 'verify_peer_name'
ok: rediss-cluster://127.0.0.1:1?verify_peer_name= (session): a ValueError naming 'verify_peer_name'
ok: rediss://127.0.0.1:1?verify_peer=0 is accepted
ok: rediss://127.0.0.1:1?verify_peer_name=0 is accepted
ok: tls://127.0.0.1:1?stream[verify_peer]=0 is accepted
done
