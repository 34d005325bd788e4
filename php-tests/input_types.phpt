--TEST--
Bad input: wrong argument types are TypeErrors (arrays, objects, null where not nullable, resources, closures); unknown or bad RedisLockingSessionHandler options are errors naming the option; nothing breaks the connection
--FILE--
<?php
/*
 * Every parameter of DistributedLock and RedisLockingSessionHandler given a
 * value of the wrong type must throw TypeError (never a ValueError, a Redis
 * error, a Rust panic turned into Error, or a crash). Options with unknown
 * names or bad values must throw ValueError (TypeError is accepted for a value
 * of a non-scalar type) whose message names the option. Scalars that PHP's
 * coercive mode converts for its own string/float/int/bool parameters (int or
 * float or Stringable for a string, bool for a float, a whole float or numeric
 * string for an int, any scalar for a bool) must be converted the same way.
 * After every refused call, a normal call on the same connection works.
 */
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$key = rl_key('types');

$l = new DistributedLock($key, 5.0, $dsn);
rl_same('lock works before the bad calls', [true, true], [$l->acquire(), $l->release()]);
$connects = RedisLease\metrics()['connects'];
$h = new RedisLockingSessionHandler($dsn);

/** "ok: $label" when $fails is empty, else "FAIL: $label" and each failure (up to 12) on its own line. */
function none_failed(string $label, array $fails): void
{
    $more = count($fails) > 12 ? "\n    ... and " . (count($fails) - 12) . ' more' : '';
    rl_ok($label, $fails === [], count($fails) . " failure(s):\n    " . implode("\n    ", array_slice($fails, 0, 12)) . $more);
}

/** The lock still works (same object, same connection); '' or what went wrong. */
function still_works(DistributedLock $l): string
{
    try {
        $got = [$l->acquire(), $l->release()];
        return $got === [true, true] ? '' : 'acquire/release gave ' . json_encode($got);
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
}

$stringable = new class {
    public function __toString(): string
    {
        return 'stringable-key';
    }
};
$plainObject = new stdClass();
$closure = static fn() => 1;
$resource = fopen('php://memory', 'r');
$wrong = [
    'array' => [], 'non-empty array' => ['a', 'b'], 'stdClass' => $plainObject, 'closure' => $closure,
    'resource' => $resource, 'null' => null,
];

/**
 * $calls: label => callable taking the wrong value. Each must throw TypeError;
 * returns the failures.
 */
function expect_type_errors(array $calls, array $values, DistributedLock $l, array $skip = []): array
{
    $fails = [];
    foreach ($calls as $label => $fn) {
        foreach ($values as $vname => $v) {
            if (in_array("$label:$vname", $skip, true)) {
                continue;
            }
            try {
                $r = $fn($v);
                $fails[] = "$label with $vname: returned " . rl_fmt($r);
            } catch (TypeError $e) {
                // expected (ArgumentCountError is a TypeError too, but none is made here)
            } catch (Throwable $e) {
                $fails[] = "$label with $vname: " . get_class($e) . ': ' . $e->getMessage();
            }
            if (($w = still_works($l)) !== '') {
                $fails[] = "$label with $vname: afterwards the lock did not work: $w";
            }
        }
    }
    return $fails;
}

/* ---- DistributedLock ---- */
$held = new DistributedLock($key . '-held', 5.0, $dsn);
$held->acquire();
$lockCalls = [
    '__construct($key)' => fn($v) => new DistributedLock($v, 5.0, $dsn),
    '__construct($ttl)' => fn($v) => new DistributedLock($key, $v, $dsn),
    '__construct($dsn)' => fn($v) => new DistributedLock($key, 5.0, $v),
    'acquire($wait)' => fn($v) => $l->acquire($v),
    'refresh($ttl) while held' => fn($v) => $held->refresh($v),
    'synchronized($callback)' => fn($v) => $l->synchronized($v),
    'synchronized(wait:)' => fn($v) => $l->synchronized(fn() => 1, $v),
];
// null is allowed for $dsn (the ini DSN) and refresh($ttl) (the constructor's ttl);
// a closure is a valid callback.
$fails = expect_type_errors($lockCalls, $wrong, $l, ['__construct($dsn):null', 'refresh($ttl) while held:null', 'synchronized($callback):closure']);
none_failed('DistributedLock: every wrong type is a TypeError', $fails);
$fails = expect_type_errors(['__construct($ttl)' => fn($v) => new DistributedLock($key, $v, $dsn),
    'acquire($wait)' => fn($v) => $l->acquire($v)], ['"soon"' => 'soon', '"INF"' => 'INF', '"1 s"' => '1 s'], $l);
none_failed('DistributedLock: non-numeric strings for a float are TypeErrors', $fails);
rl_same('the held lock is still held after the refused refresh() calls', true, $held->isAcquired());
rl_same('... and releases', true, $held->release());
rl_same('no stray lock keys were made', [], $raw->cmd('KEYS', 'lock:{' . $key . '*}'));

// Not callable: names of missing functions, arrays that are not [object, method].
$fails = expect_type_errors(['synchronized($callback)' => fn($v) => $l->synchronized($v)],
    ['"no_such_fn"' => 'no_such_fn_xyz', '[obj, missing]' => [$l, 'missing'], 'int' => 42, '"DistributedLock::nope"' => 'DistributedLock::nope'], $l);
none_failed('synchronized(): values that are not callable are TypeErrors', $fails);

/* ---- Coercive mode: the conversions PHP makes for its own parameters ---- */
$coerce = [
    'int key 42 is the key "42"' => fn() => (new DistributedLock(42, 5.0, $dsn))->getKey() === '42',
    'float key 1.5 is the key "1.5"' => fn() => (new DistributedLock(1.5, 5.0, $dsn))->getKey() === '1.5',
    'Stringable key is its string' => fn() => (new DistributedLock($stringable, 5.0, $dsn))->getKey() === 'stringable-key',
    'bool ttl true is 1.0 s' => fn() => (new DistributedLock($key, true, $dsn)) instanceof DistributedLock,
    'int ttl 5 is 5.0 s' => fn() => (new DistributedLock($key, 5, $dsn)) instanceof DistributedLock,
    'numeric string wait "0.0" is 0.0' => fn() => [$l->acquire('0.0'), $l->release()] === [true, true],
    // int and bool parameters too (review, stop 58: a limit from getenv() was a TypeError).
    'numeric string limit "3" is 3' => fn() => (new DistributedSemaphore($key . '-s', '3', 5.0, $dsn))->getLimit() === 3,
    'float limit 3.0 is 3' => fn() => (new DistributedSemaphore($key . '-s', 3.0, 5.0, $dsn))->getLimit() === 3,
    'numeric string permits "2" is 2' => fn() => (function () use ($key, $dsn) {
        $s = new DistributedSemaphore($key . '-s', 3, 5.0, $dsn);
        return [$s->acquire(0.0, '2'), $s->release()] === [true, true];
    })(),
    'int autoRenew 1 is true' => fn() => (new DistributedLock($key, 5, $dsn, 1)) instanceof DistributedLock,
    'string autoRenew "0" is false' => fn() => (new DistributedSemaphore($key . '-s', 2, 5.0, $dsn, '0')) instanceof DistributedSemaphore,
    'int metrics(0) is metrics(false)' => fn() => is_array(RedisLease\metrics(0)),
];
// Refused as an int: a string that is no number (as PHP does), a fraction (PHP truncates it with a deprecation).
$refusedInts = [
    'limit 2.5' => fn() => new DistributedSemaphore($key . '-s', 2.5, 5.0, $dsn),
    'limit "three"' => fn() => new DistributedSemaphore($key . '-s', 'three', 5.0, $dsn),
    'permits "1.5"' => fn() => (new DistributedSemaphore($key . '-s', 3, 5.0, $dsn))->acquire(0.0, '1.5'),
];
$fails = [];
foreach ($refusedInts as $label => $fn) {
    try {
        $fn();
        $fails[] = "$label: accepted";
    } catch (TypeError) {
    } catch (Throwable $e) {
        $fails[] = "$label: " . get_class($e) . ': ' . $e->getMessage();
    }
}
none_failed('coercive mode: an int that is not a whole number is a TypeError', $fails);
foreach ($coerce as $label => $fn) {
    try {
        $r = $fn();
        rl_ok("coercive mode: $label", $r === true, rl_fmt($r));
    } catch (Throwable $e) {
        rl_ok("coercive mode: $label", false, get_class($e) . ': ' . $e->getMessage());
    }
}
rl_same('coercive mode checks: the lock still works', '', still_works($l));

/* ---- RedisLockingSessionHandler ---- */
$sid = bin2hex(random_bytes(16));
$sessCalls = [
    '__construct($dsn)' => fn($v) => new RedisLockingSessionHandler($v),
    'open($path)' => fn($v) => $h->open($v, 'PHPSESSID'),
    'open($name)' => fn($v) => $h->open('', $v),
    'read($id)' => fn($v) => $h->read($v),
    'write($id)' => fn($v) => $h->write($v, ''),
    'write($data)' => fn($v) => $h->write($sid, $v),
    'destroy($id)' => fn($v) => $h->destroy($v),
    'gc($max_lifetime)' => fn($v) => $h->gc($v),
    'validateId($id)' => fn($v) => $h->validateId($v),
    'updateTimestamp($id)' => fn($v) => $h->updateTimestamp($v, ''),
    'updateTimestamp($data)' => fn($v) => $h->updateTimestamp($sid, $v),
];
$fails = expect_type_errors($sessCalls, $wrong, $l, ['__construct($dsn):null']);
none_failed('RedisLockingSessionHandler: every wrong type is a TypeError', $fails);
$fails = expect_type_errors(['__construct($options)' => fn($v) => new RedisLockingSessionHandler($dsn, $v)],
    ['string' => 'lock_wait=1', 'int' => 1, 'stdClass' => (object) ['lock_wait' => 1], 'closure' => $closure, 'null' => null], $l);
none_failed('RedisLockingSessionHandler: $options that is not an array is a TypeError', $fails);
rl_same('no session key was made by the refused calls', [], $raw->cmd('KEYS', '*' . $sid . '*'));

/* ---- Options: unknown names and bad values name the option ---- */
$optFails = [];
$check = static function (string $label, array $options, string $name, bool $typeErrorOk) use ($dsn, $l, &$optFails): void {
    try {
        new RedisLockingSessionHandler($dsn, $options);
        $optFails[] = "$label: accepted";
    } catch (ValueError $e) {
        if (!str_contains($e->getMessage(), $name)) {
            $optFails[] = "$label: message does not name the option: " . $e->getMessage();
        }
    } catch (TypeError $e) {
        if (!$typeErrorOk) {
            $optFails[] = "$label: TypeError (a ValueError was expected): " . $e->getMessage();
        } elseif (!str_contains($e->getMessage(), $name)) {
            $optFails[] = "$label: message does not name the option: " . $e->getMessage();
        }
    } catch (Throwable $e) {
        $optFails[] = "$label: " . get_class($e) . ': ' . $e->getMessage();
    }
    if (($w = still_works($l)) !== '') {
        $optFails[] = "$label: afterwards the lock did not work: $w";
    }
};
foreach (['nope', 'LOCK_TTL', 'lock-ttl', ' lock_ttl', 'lock_ttl ', 'redis_lease.session.lock_ttl', 'lockTtl', 'save_path'] as $name) {
    $check("unknown option name '$name'", [$name => 1], $name, false);
}
$check('unknown option name 0 (a list instead of a map)', ['lock_ttl'], '0', false);
$check('option name with a NUL byte', ["lock_ttl\0x" => 1], 'lock_ttl', false);
$check('option name that is not UTF-8 ("\xff\xfe")', ["bad\xff\xfe" => 1], 'bad', false);
foreach ([
    ['locking', 'maybe'], ['locking', 2], ['locking', -1],
    ['on_lock_timeout', 'ignore'], ['on_lock_timeout', ''], ['on_lock_timeout', 1],
    ['prefix', 'a{b'], ['prefix', "a\nb"], ['prefix', str_repeat('p', 257)], ['prefix', "p\0"], ['prefix', ''],
] as [$name, $value]) {
    $check("option $name = " . rl_fmt($value), [$name => $value], $name, false);
}
foreach (['lock_ttl', 'lock_wait', 'max_waiters', 'locking', 'on_lock_timeout', 'prefix'] as $name) {
    foreach (['array' => [1], 'stdClass' => new stdClass(), 'closure' => $closure, 'null' => null] as $vname => $value) {
        $check("option $name = $vname", [$name => $value], $name, true);
    }
}
none_failed('options: every unknown name or bad value is an error naming the option', $optFails);

// An empty prefix from php.ini is refused as the option is: a session's key
// would be its bare id, and any key of the application's a session to a cookie.
ini_set('redis_lease.session.prefix', '');
$e = rl_throws('ini redis_lease.session.prefix empty: the handler is a ValueError', ValueError::class,
    fn() => new RedisLockingSessionHandler($dsn));
rl_ok('... naming the setting', $e !== null && str_contains($e->getMessage(), 'redis_lease.session.prefix'), $e?->getMessage() ?? '');
ini_restore('redis_lease.session.prefix');

// A prefix that is not UTF-8 is either accepted (Redis keys are bytes) or refused naming 'prefix'.
try {
    new RedisLockingSessionHandler($dsn, ['prefix' => "sess\xff:"]);
    $r = 'accepted';
} catch (ValueError | TypeError $e) {
    $r = str_contains($e->getMessage(), 'prefix') ? 'refused naming prefix' : get_class($e) . ': ' . $e->getMessage();
} catch (Throwable $e) {
    $r = get_class($e) . ': ' . $e->getMessage();
}
rl_ok("option prefix = \"sess\\xff:\": accepted, or an error naming 'prefix'", in_array($r, ['accepted', 'refused naming prefix'], true), $r);

// The handler still reads and writes after all that.
$sid2 = bin2hex(random_bytes(16));
rl_same('the handler reads after the bad calls', '', $h->read($sid2));
rl_same('... and writes', true, $h->write($sid2, 'a|i:1;'));
rl_same('... to Redis', 'a|i:1;', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid2));
rl_same('the lock still works at the end', '', still_works($l));
rl_same('... on the same connection', $connects, RedisLease\metrics()['connects']);
echo "done\n";
?>
--EXPECT--
ok: lock works before the bad calls
ok: DistributedLock: every wrong type is a TypeError
ok: DistributedLock: non-numeric strings for a float are TypeErrors
ok: the held lock is still held after the refused refresh() calls
ok: ... and releases
ok: no stray lock keys were made
ok: synchronized(): values that are not callable are TypeErrors
ok: coercive mode: an int that is not a whole number is a TypeError
ok: coercive mode: int key 42 is the key "42"
ok: coercive mode: float key 1.5 is the key "1.5"
ok: coercive mode: Stringable key is its string
ok: coercive mode: bool ttl true is 1.0 s
ok: coercive mode: int ttl 5 is 5.0 s
ok: coercive mode: numeric string wait "0.0" is 0.0
ok: coercive mode: numeric string limit "3" is 3
ok: coercive mode: float limit 3.0 is 3
ok: coercive mode: numeric string permits "2" is 2
ok: coercive mode: int autoRenew 1 is true
ok: coercive mode: string autoRenew "0" is false
ok: coercive mode: int metrics(0) is metrics(false)
ok: coercive mode checks: the lock still works
ok: RedisLockingSessionHandler: every wrong type is a TypeError
ok: RedisLockingSessionHandler: $options that is not an array is a TypeError
ok: no session key was made by the refused calls
ok: options: every unknown name or bad value is an error naming the option
ok: ini redis_lease.session.prefix empty: the handler is a ValueError
ok: ... naming the setting
ok: option prefix = "sess\xff:": accepted, or an error naming 'prefix'
ok: the handler reads after the bad calls
ok: ... and writes
ok: ... to Redis
ok: the lock still works at the end
ok: ... on the same connection
done
