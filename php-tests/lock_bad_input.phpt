--TEST--
DistributedLock: invalid values throw ValueError, wrong types throw TypeError (no Redis error, no password in messages)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('bad');
$rk = rl_lock_key($k);

// --- constructor: key
rl_throws('empty key', ValueError::class, fn() => new DistributedLock('', 5.0, $dsn));
rl_throws('key of 1025 bytes', ValueError::class, fn() => new DistributedLock(str_repeat('k', 1025), 5.0, $dsn));
rl_throws('key of 1025 bytes (multibyte chars)', ValueError::class, fn() => new DistributedLock(str_repeat('é', 512) . 'x', 5.0, $dsn));
// 1024 bytes is the maximum and must work.
$long = new DistributedLock(str_repeat('k', 1024), 5.0, $dsn);
rl_same('key of exactly 1024 bytes acquires', true, $long->acquire());
rl_same('key of exactly 1024 bytes releases', true, $long->release());

// --- constructor: ttl
foreach (['0.0' => 0.0, '-0.0' => -0.0, '-1.0' => -1.0, 'INF' => INF, '-INF' => -INF, 'NAN' => NAN,
          '2592000.001' => 2592000.001, '1e9' => 1e9] as $name => $ttl) {
    rl_throws("ttl $name", ValueError::class, fn() => new DistributedLock($k, $ttl, $dsn));
}
rl_throws('ttl 0 (int)', ValueError::class, fn() => new DistributedLock($k, 0, $dsn));
$max = new DistributedLock($k, 2592000.0, $dsn);
rl_same('ttl 2592000 (the maximum) is accepted and acquires', true, $max->acquire());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('ttl 2592000: PTTL close to 2592000000 ms', $pttl > 2591990000 && $pttl <= 2592000000, rl_fmt($pttl));
rl_same('ttl 2592000 releases', true, $max->release());
unset($max);

// --- constructor: malformed DSNs. The password must not leak into the message.
$bad = [
    'redis://host:notaport',
    'ftp://x',
    'redis://:pw@',
    'redis://h/abc',
    'redis://127.0.0.1:99999',          // port out of range
    'redis://127.0.0.1:6379/-1',        // negative db
    'not a dsn',
    'redis://:Sup3rSecretPW@host:notaport',
    'tcp://127.0.0.1:6379?database=abc&auth=Sup3rSecretPW',
];
foreach ($bad as $d) {
    $e = rl_throws("malformed DSN " . str_replace('Sup3rSecretPW', '<pw>', $d), ValueError::class,
        fn() => new DistributedLock($k, 5.0, $d));
    if ($e !== null && str_contains($d, 'Sup3rSecretPW')) {
        rl_ok('  ...and the password is not in the message', !str_contains($e->getMessage(), 'Sup3rSecretPW'),
            $e->getMessage());
    }
}

$l = new DistributedLock($k, 5.0, $dsn);
// --- acquire: wait
foreach (['-1.0' => -1.0, '-0.001' => -0.001, 'INF' => INF, 'NAN' => NAN, '2592000.5' => 2592000.5] as $name => $w) {
    rl_throws("acquire(wait: $name)", ValueError::class, fn() => $l->acquire($w));
}
rl_same('no lock was taken by the rejected acquire() calls', 0, $raw->cmd('EXISTS', $rk));

// --- refresh: ttl (while held)
rl_same('acquire for refresh checks', true, $l->acquire());
foreach (['0.0' => 0.0, '-1.0' => -1.0, 'INF' => INF, 'NAN' => NAN, '2592001.0' => 2592001.0] as $name => $t) {
    rl_throws("refresh(ttl: $name)", ValueError::class, fn() => $l->refresh($t));
}
rl_same('lock still held after rejected refresh() calls', true, $l->isAcquired());
rl_same('release', true, $l->release());

// --- synchronized: wait (callback must not run)
$ran = false;
foreach (['-1.0' => -1.0, 'INF' => INF, 'NAN' => NAN, '2592000.5' => 2592000.5] as $name => $w) {
    rl_throws("synchronized(wait: $name)", ValueError::class, function () use ($l, $w, &$ran) {
        return $l->synchronized(function () use (&$ran) { $ran = true; }, $w);
    });
}
rl_same('callback never ran for invalid waits', false, $ran);
rl_same('no lock left behind', 0, $raw->cmd('EXISTS', $rk));

// --- wrong types
rl_throws('constructor key array', TypeError::class, fn() => new DistributedLock([], 5.0, $dsn));
rl_throws('constructor ttl non-numeric string', TypeError::class, fn() => new DistributedLock($k, 'abc', $dsn));
rl_throws('constructor ttl array', TypeError::class, fn() => new DistributedLock($k, [], $dsn));
rl_throws('constructor dsn array', TypeError::class, fn() => new DistributedLock($k, 5.0, []));
rl_throws('constructor dsn object', TypeError::class, fn() => new DistributedLock($k, 5.0, new stdClass()));
rl_throws('constructor without arguments', ArgumentCountError::class, fn() => new DistributedLock());
rl_throws('constructor with too many arguments', ArgumentCountError::class, fn() => new DistributedLock($k, 5.0, $dsn, false, 1));
rl_throws('acquire non-numeric string', TypeError::class, fn() => $l->acquire('soon'));
rl_throws('acquire array', TypeError::class, fn() => $l->acquire([]));
rl_throws('refresh non-numeric string', TypeError::class, fn() => $l->refresh('later'));
rl_throws('synchronized non-callable string', TypeError::class, fn() => $l->synchronized('no_such_function_xyz'));
rl_throws('synchronized array that is not callable', TypeError::class, fn() => $l->synchronized([1, 2]));
rl_throws('synchronized wait non-numeric', TypeError::class, fn() => $l->synchronized(fn() => 1, 'x'));
rl_throws('synchronized without callback', ArgumentCountError::class, fn() => $l->synchronized());
rl_throws('release with an argument', ArgumentCountError::class, fn() => $l->release(1));
// Ints and numeric strings coerce to float in non-strict mode, as for any
// internal function with a float parameter.
foreach (['acquire(0) (int)' => 0, 'acquire("0") (numeric string)' => '0', 'acquire("0.0") (numeric string)' => '0.0'] as $label => $arg) {
    try {
        $r = $l->acquire($arg);
    } catch (Throwable $e) {
        $r = get_class($e) . ': ' . $e->getMessage();
    }
    rl_same("$label is accepted", true, $r);
    $l->release();
}
try {
    $r = $l->refresh('5');
} catch (Throwable $e) {
    $r = get_class($e) . ': ' . $e->getMessage();
}
rl_same('refresh("5") (numeric string, not held) is accepted', false, $r);

// A sub-millisecond ttl passes validation (> 0); it must not produce an
// invalid PX for Redis (ConnectionException would be wrong here).
try {
    $tiny = new DistributedLock($k, 0.0001, $dsn);
    $r = $tiny->acquire();
    rl_ok('ttl 0.0001: acquire returned a bool', is_bool($r), rl_fmt($r));
    $tiny->release();
} catch (ValueError $e) {
    rl_ok('ttl 0.0001: acquire returned a bool', true);
} catch (Throwable $e) {
    rl_ok('ttl 0.0001: acquire returned a bool', false, get_class($e) . ': ' . $e->getMessage());
}

unset($l, $long, $tiny);
echo "done\n";
?>
--EXPECT--
ok: empty key
ok: key of 1025 bytes
ok: key of 1025 bytes (multibyte chars)
ok: key of exactly 1024 bytes acquires
ok: key of exactly 1024 bytes releases
ok: ttl 0.0
ok: ttl -0.0
ok: ttl -1.0
ok: ttl INF
ok: ttl -INF
ok: ttl NAN
ok: ttl 2592000.001
ok: ttl 1e9
ok: ttl 0 (int)
ok: ttl 2592000 (the maximum) is accepted and acquires
ok: ttl 2592000: PTTL close to 2592000000 ms
ok: ttl 2592000 releases
ok: malformed DSN redis://host:notaport
ok: malformed DSN ftp://x
ok: malformed DSN redis://:pw@
ok: malformed DSN redis://h/abc
ok: malformed DSN redis://127.0.0.1:99999
ok: malformed DSN redis://127.0.0.1:6379/-1
ok: malformed DSN not a dsn
ok: malformed DSN redis://:<pw>@host:notaport
ok:   ...and the password is not in the message
ok: malformed DSN tcp://127.0.0.1:6379?database=abc&auth=<pw>
ok:   ...and the password is not in the message
ok: acquire(wait: -1.0)
ok: acquire(wait: -0.001)
ok: acquire(wait: INF)
ok: acquire(wait: NAN)
ok: acquire(wait: 2592000.5)
ok: no lock was taken by the rejected acquire() calls
ok: acquire for refresh checks
ok: refresh(ttl: 0.0)
ok: refresh(ttl: -1.0)
ok: refresh(ttl: INF)
ok: refresh(ttl: NAN)
ok: refresh(ttl: 2592001.0)
ok: lock still held after rejected refresh() calls
ok: release
ok: synchronized(wait: -1.0)
ok: synchronized(wait: INF)
ok: synchronized(wait: NAN)
ok: synchronized(wait: 2592000.5)
ok: callback never ran for invalid waits
ok: no lock left behind
ok: constructor key array
ok: constructor ttl non-numeric string
ok: constructor ttl array
ok: constructor dsn array
ok: constructor dsn object
ok: constructor without arguments
ok: constructor with too many arguments
ok: acquire non-numeric string
ok: acquire array
ok: refresh non-numeric string
ok: synchronized non-callable string
ok: synchronized array that is not callable
ok: synchronized wait non-numeric
ok: synchronized without callback
ok: release with an argument
ok: acquire(0) (int) is accepted
ok: acquire("0") (numeric string) is accepted
ok: acquire("0.0") (numeric string) is accepted
ok: refresh("5") (numeric string, not held) is accepted
ok: ttl 0.0001: acquire returned a bool
done
