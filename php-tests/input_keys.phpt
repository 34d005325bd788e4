--TEST--
Bad input: lock keys of 1024 bytes work, 1025 bytes and 10 MB are a quick ValueError; binary keys (every byte value, NUL, invalid UTF-8) map to exactly "lock:{<bytes>}" and getKey() returns them
--FILE--
<?php
/*
 * DistributedLock keys are byte strings of 1 to 1024 bytes. The Redis key must
 * be exactly "lock:{" . $key . "}" (binary safe, nothing escaped or
 * re-encoded) and getKey() must return the very same bytes. Too long keys are
 * refused quickly with a short message that does not echo the key. After each
 * refused call, a normal call on the same connection works.
 */
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

$ref = new DistributedLock(rl_key('keys-ref'), 5.0, $dsn);
rl_same('reference lock acquires', true, $ref->acquire());
rl_same('reference lock releases', true, $ref->release());
$connects = RedisLease\metrics()['connects'];

/** A normal call on the same connection still works; returns '' or what went wrong. */
function ref_works(DistributedLock $ref): string
{
    try {
        $got = [$ref->acquire(), $ref->release()];
        return $got === [true, true] ? '' : 'acquire/release gave ' . json_encode($got);
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
}

/** $s with bytes outside printable ASCII as \xHH, shortened. */
function show(string $s): string
{
    $s = strlen($s) > 80 ? substr($s, 0, 80) . '...(' . strlen($s) . ' bytes)' : $s;
    return "'" . preg_replace_callback('/[^\x20-\x7e]/', static fn($m) => sprintf('\\x%02x', ord($m[0])), $s) . "'";
}

/* ---- Lengths ---- */

$k1024 = str_repeat('L', 1023) . 'Z';
$l = new DistributedLock($k1024, 5.0, $dsn);
rl_same('1024-byte key: getKey() returns it', $k1024, $l->getKey());
rl_same('1024-byte key: acquire', true, $l->acquire());
rl_same('1024-byte key: the Redis key is lock:{<key>}', 1, $raw->cmd('EXISTS', 'lock:{' . $k1024 . '}'));
rl_same('1024-byte key: release', true, $l->release());
unset($l);

foreach (['1025 bytes' => str_repeat('k', 1025),
          '1025 binary bytes' => str_repeat("\0\xff", 512) . "\x80",
          '10 MB' => str_repeat('k', 10 * 1024 * 1024),
          '10 MB with NUL bytes' => str_repeat("a\0", 5 * 1024 * 1024)] as $label => $key) {
    $t = microtime(true);
    $e = rl_throws("$label: ValueError", ValueError::class, fn() => new DistributedLock($key, 5.0, $dsn));
    $took = microtime(true) - $t;
    rl_ok("$label: refused quickly (< 0.5 s)", $took < 0.5, sprintf('%.3f s', $took));
    if ($e !== null) {
        $m = $e->getMessage();
        rl_ok("$label: the message is short and names \$key", strlen($m) < 300 && str_contains($m, '$key'), show($m));
    }
    rl_same("$label: a normal call on the same connection still works", '', ref_works($ref));
}
rl_same('no key was created for the refused keys', [], $raw->cmd('KEYS', 'lock:{kk*'));

/* ---- Binary keys ---- */

// Every single byte value as a one-byte key, but '}': a key that starts with it
// would leave the Redis Cluster hash tag of "lock:{}…}" empty (its keys would
// spread over slots), so it is refused.
$byteProblems = [];
for ($b = 0; $b < 256; $b++) {
    $key = chr($b);
    if ($key === '}') {
        continue;
    }
    $problem = '';
    try {
        $l = new DistributedLock($key, 5.0, $dsn);
        if ($l->getKey() !== $key) {
            $problem = 'getKey() returned ' . show($l->getKey());
        } elseif ($l->acquire() !== true) {
            $problem = 'acquire() was not true';
        } elseif ($raw->cmd('EXISTS', 'lock:{' . $key . '}') !== 1) {
            $problem = 'lock:{' . show($key) . '} does not exist in Redis';
        } elseif ($l->release() !== true) {
            $problem = 'release() was not true';
        } elseif ($raw->cmd('EXISTS', 'lock:{' . $key . '}') !== 0) {
            $problem = 'the lock key is still there after release()';
        }
        unset($l);
    } catch (Throwable $e) {
        $problem = get_class($e) . ': ' . $e->getMessage();
    }
    if ($problem !== '') {
        $byteProblems[] = sprintf('0x%02x: %s', $b, $problem);
    }
}
foreach (['}', '}x', "}\0{", '}{tag}'] as $key) {
    $e = rl_throws('a key starting with "}" (' . show($key) . ') is a ValueError', ValueError::class,
        fn() => new DistributedLock($key, 5.0, $dsn));
    rl_ok('... naming $key and the hash tag', $e !== null && str_contains($e->getMessage(), '$key')
        && str_contains($e->getMessage(), 'hash tag'), $e ? $e->getMessage() : '');
}
rl_ok('all 255 other one-byte keys: accepted, lock:{<byte>} in Redis, getKey() identical, released',
    $byteProblems === [], count($byteProblems) . ' byte(s) failed, e.g. ' . implode('; ', array_slice($byteProblems, 0, 4)));
rl_same('one-byte keys: the reference lock still works on the same connection', '', ref_works($ref));

$all256 = implode('', array_map('chr', range(0, 255)));
$binaryKeys = [
    'all 256 byte values in one key' => $all256,
    'all 256 byte values, reversed' => strrev($all256),
    'a lone NUL' => "\0",
    'NULs inside' => "a\0b\0\0c",
    'trailing NUL' => "key\0",
    'invalid UTF-8: lone continuation bytes' => "\x80\x81\xbf",
    'invalid UTF-8: truncated sequence' => "abc\xe2\x82",
    'invalid UTF-8: overlong "/"' => "\xc0\xaf",
    'invalid UTF-8: UTF-16 surrogate' => "\xed\xa0\x80",
    'invalid UTF-8: 0xff 0xfe' => "\xff\xfe",
    'RESP look-alike' => "\r\n*1\r\n\$4\r\nPING\r\n",
    'braces and NUL' => "{\0}}{",
    '1024 random bytes' => random_bytes(1024),
];
foreach ($binaryKeys as $label => $key) {
    try {
        $l = new DistributedLock($key, 5.0, $dsn);
    } catch (Throwable $e) {
        rl_ok("$label: accepted", false, get_class($e) . ': ' . $e->getMessage());
        rl_same("$label: a normal call on the same connection still works", '', ref_works($ref));
        continue;
    }
    rl_ok("$label: accepted", true);
    rl_same("$label: getKey() returns the same bytes", bin2hex($key), bin2hex($l->getKey()));
    rl_same("$label: acquire", true, $l->acquire());
    rl_ok("$label: a fencing token", is_int($l->getFencingToken()));
    $redisKey = 'lock:{' . $key . '}';
    rl_same("$label: Redis key is exactly lock:{<bytes>}", 1, $raw->cmd('EXISTS', $redisKey));
    rl_same("$label: its fencing counter is lock:{<bytes>}:fence", 1, $raw->cmd('EXISTS', $redisKey . ':fence'));
    rl_same("$label: fencing token is an int", true, is_int($l->getFencingToken()));
    $other = new DistributedLock($key, 5.0, $dsn);
    rl_same("$label: a second object of the same key is refused", false, $other->acquire());
    // The contender's synchronized() times out; its message must be printable UTF-8.
    $e = rl_throws("$label: contender's synchronized(wait: 0) times out", RedisLease\LockTimeoutException::class,
        fn() => $other->synchronized(fn() => 1, 0.0));
    if ($e !== null) {
        rl_ok("$label: ... with a valid UTF-8 message without control characters",
            preg_match('//u', $e->getMessage()) === 1 && preg_match('/[\x00-\x1f\x7f]/', $e->getMessage()) === 0,
            show($e->getMessage()));
    }
    // A key differing in its last byte is another lock.
    $near = new DistributedLock(substr($key, 0, -1) . chr((ord(substr($key, -1)) + 1) % 256), 5.0, $dsn);
    rl_same("$label: a key differing in one byte is an independent lock", true, $near->acquire());
    rl_same("$label: release", true, $l->release());
    rl_same("$label: lock key gone", 0, $raw->cmd('EXISTS', $redisKey));
    $near->release();
    unset($l, $other, $near);
}

/* ---- What is left in Redis: only fencing counters, all under lock:{ ---- */
$left = $raw->cmd('KEYS', '*');
$strays = array_values(array_filter($left, static fn(string $k) => !str_starts_with($k, 'lock:{') || !str_ends_with($k, '}:fence')));
rl_same('every key left in Redis is a lock:{...}:fence counter', [], array_map('show', $strays));
rl_same('every call used the same connection', $connects, RedisLease\metrics()['connects']);
echo "done\n";
?>
--EXPECT--
ok: reference lock acquires
ok: reference lock releases
ok: 1024-byte key: getKey() returns it
ok: 1024-byte key: acquire
ok: 1024-byte key: the Redis key is lock:{<key>}
ok: 1024-byte key: release
ok: 1025 bytes: ValueError
ok: 1025 bytes: refused quickly (< 0.5 s)
ok: 1025 bytes: the message is short and names $key
ok: 1025 bytes: a normal call on the same connection still works
ok: 1025 binary bytes: ValueError
ok: 1025 binary bytes: refused quickly (< 0.5 s)
ok: 1025 binary bytes: the message is short and names $key
ok: 1025 binary bytes: a normal call on the same connection still works
ok: 10 MB: ValueError
ok: 10 MB: refused quickly (< 0.5 s)
ok: 10 MB: the message is short and names $key
ok: 10 MB: a normal call on the same connection still works
ok: 10 MB with NUL bytes: ValueError
ok: 10 MB with NUL bytes: refused quickly (< 0.5 s)
ok: 10 MB with NUL bytes: the message is short and names $key
ok: 10 MB with NUL bytes: a normal call on the same connection still works
ok: no key was created for the refused keys
ok: a key starting with "}" ('}') is a ValueError
ok: ... naming $key and the hash tag
ok: a key starting with "}" ('}x') is a ValueError
ok: ... naming $key and the hash tag
ok: a key starting with "}" ('}\x00{') is a ValueError
ok: ... naming $key and the hash tag
ok: a key starting with "}" ('}{tag}') is a ValueError
ok: ... naming $key and the hash tag
ok: all 255 other one-byte keys: accepted, lock:{<byte>} in Redis, getKey() identical, released
ok: one-byte keys: the reference lock still works on the same connection
ok: all 256 byte values in one key: accepted
ok: all 256 byte values in one key: getKey() returns the same bytes
ok: all 256 byte values in one key: acquire
ok: all 256 byte values in one key: a fencing token
ok: all 256 byte values in one key: Redis key is exactly lock:{<bytes>}
ok: all 256 byte values in one key: its fencing counter is lock:{<bytes>}:fence
ok: all 256 byte values in one key: fencing token is an int
ok: all 256 byte values in one key: a second object of the same key is refused
ok: all 256 byte values in one key: contender's synchronized(wait: 0) times out
ok: all 256 byte values in one key: ... with a valid UTF-8 message without control characters
ok: all 256 byte values in one key: a key differing in one byte is an independent lock
ok: all 256 byte values in one key: release
ok: all 256 byte values in one key: lock key gone
ok: all 256 byte values, reversed: accepted
ok: all 256 byte values, reversed: getKey() returns the same bytes
ok: all 256 byte values, reversed: acquire
ok: all 256 byte values, reversed: a fencing token
ok: all 256 byte values, reversed: Redis key is exactly lock:{<bytes>}
ok: all 256 byte values, reversed: its fencing counter is lock:{<bytes>}:fence
ok: all 256 byte values, reversed: fencing token is an int
ok: all 256 byte values, reversed: a second object of the same key is refused
ok: all 256 byte values, reversed: contender's synchronized(wait: 0) times out
ok: all 256 byte values, reversed: ... with a valid UTF-8 message without control characters
ok: all 256 byte values, reversed: a key differing in one byte is an independent lock
ok: all 256 byte values, reversed: release
ok: all 256 byte values, reversed: lock key gone
ok: a lone NUL: accepted
ok: a lone NUL: getKey() returns the same bytes
ok: a lone NUL: acquire
ok: a lone NUL: a fencing token
ok: a lone NUL: Redis key is exactly lock:{<bytes>}
ok: a lone NUL: its fencing counter is lock:{<bytes>}:fence
ok: a lone NUL: fencing token is an int
ok: a lone NUL: a second object of the same key is refused
ok: a lone NUL: contender's synchronized(wait: 0) times out
ok: a lone NUL: ... with a valid UTF-8 message without control characters
ok: a lone NUL: a key differing in one byte is an independent lock
ok: a lone NUL: release
ok: a lone NUL: lock key gone
ok: NULs inside: accepted
ok: NULs inside: getKey() returns the same bytes
ok: NULs inside: acquire
ok: NULs inside: a fencing token
ok: NULs inside: Redis key is exactly lock:{<bytes>}
ok: NULs inside: its fencing counter is lock:{<bytes>}:fence
ok: NULs inside: fencing token is an int
ok: NULs inside: a second object of the same key is refused
ok: NULs inside: contender's synchronized(wait: 0) times out
ok: NULs inside: ... with a valid UTF-8 message without control characters
ok: NULs inside: a key differing in one byte is an independent lock
ok: NULs inside: release
ok: NULs inside: lock key gone
ok: trailing NUL: accepted
ok: trailing NUL: getKey() returns the same bytes
ok: trailing NUL: acquire
ok: trailing NUL: a fencing token
ok: trailing NUL: Redis key is exactly lock:{<bytes>}
ok: trailing NUL: its fencing counter is lock:{<bytes>}:fence
ok: trailing NUL: fencing token is an int
ok: trailing NUL: a second object of the same key is refused
ok: trailing NUL: contender's synchronized(wait: 0) times out
ok: trailing NUL: ... with a valid UTF-8 message without control characters
ok: trailing NUL: a key differing in one byte is an independent lock
ok: trailing NUL: release
ok: trailing NUL: lock key gone
ok: invalid UTF-8: lone continuation bytes: accepted
ok: invalid UTF-8: lone continuation bytes: getKey() returns the same bytes
ok: invalid UTF-8: lone continuation bytes: acquire
ok: invalid UTF-8: lone continuation bytes: a fencing token
ok: invalid UTF-8: lone continuation bytes: Redis key is exactly lock:{<bytes>}
ok: invalid UTF-8: lone continuation bytes: its fencing counter is lock:{<bytes>}:fence
ok: invalid UTF-8: lone continuation bytes: fencing token is an int
ok: invalid UTF-8: lone continuation bytes: a second object of the same key is refused
ok: invalid UTF-8: lone continuation bytes: contender's synchronized(wait: 0) times out
ok: invalid UTF-8: lone continuation bytes: ... with a valid UTF-8 message without control characters
ok: invalid UTF-8: lone continuation bytes: a key differing in one byte is an independent lock
ok: invalid UTF-8: lone continuation bytes: release
ok: invalid UTF-8: lone continuation bytes: lock key gone
ok: invalid UTF-8: truncated sequence: accepted
ok: invalid UTF-8: truncated sequence: getKey() returns the same bytes
ok: invalid UTF-8: truncated sequence: acquire
ok: invalid UTF-8: truncated sequence: a fencing token
ok: invalid UTF-8: truncated sequence: Redis key is exactly lock:{<bytes>}
ok: invalid UTF-8: truncated sequence: its fencing counter is lock:{<bytes>}:fence
ok: invalid UTF-8: truncated sequence: fencing token is an int
ok: invalid UTF-8: truncated sequence: a second object of the same key is refused
ok: invalid UTF-8: truncated sequence: contender's synchronized(wait: 0) times out
ok: invalid UTF-8: truncated sequence: ... with a valid UTF-8 message without control characters
ok: invalid UTF-8: truncated sequence: a key differing in one byte is an independent lock
ok: invalid UTF-8: truncated sequence: release
ok: invalid UTF-8: truncated sequence: lock key gone
ok: invalid UTF-8: overlong "/": accepted
ok: invalid UTF-8: overlong "/": getKey() returns the same bytes
ok: invalid UTF-8: overlong "/": acquire
ok: invalid UTF-8: overlong "/": a fencing token
ok: invalid UTF-8: overlong "/": Redis key is exactly lock:{<bytes>}
ok: invalid UTF-8: overlong "/": its fencing counter is lock:{<bytes>}:fence
ok: invalid UTF-8: overlong "/": fencing token is an int
ok: invalid UTF-8: overlong "/": a second object of the same key is refused
ok: invalid UTF-8: overlong "/": contender's synchronized(wait: 0) times out
ok: invalid UTF-8: overlong "/": ... with a valid UTF-8 message without control characters
ok: invalid UTF-8: overlong "/": a key differing in one byte is an independent lock
ok: invalid UTF-8: overlong "/": release
ok: invalid UTF-8: overlong "/": lock key gone
ok: invalid UTF-8: UTF-16 surrogate: accepted
ok: invalid UTF-8: UTF-16 surrogate: getKey() returns the same bytes
ok: invalid UTF-8: UTF-16 surrogate: acquire
ok: invalid UTF-8: UTF-16 surrogate: a fencing token
ok: invalid UTF-8: UTF-16 surrogate: Redis key is exactly lock:{<bytes>}
ok: invalid UTF-8: UTF-16 surrogate: its fencing counter is lock:{<bytes>}:fence
ok: invalid UTF-8: UTF-16 surrogate: fencing token is an int
ok: invalid UTF-8: UTF-16 surrogate: a second object of the same key is refused
ok: invalid UTF-8: UTF-16 surrogate: contender's synchronized(wait: 0) times out
ok: invalid UTF-8: UTF-16 surrogate: ... with a valid UTF-8 message without control characters
ok: invalid UTF-8: UTF-16 surrogate: a key differing in one byte is an independent lock
ok: invalid UTF-8: UTF-16 surrogate: release
ok: invalid UTF-8: UTF-16 surrogate: lock key gone
ok: invalid UTF-8: 0xff 0xfe: accepted
ok: invalid UTF-8: 0xff 0xfe: getKey() returns the same bytes
ok: invalid UTF-8: 0xff 0xfe: acquire
ok: invalid UTF-8: 0xff 0xfe: a fencing token
ok: invalid UTF-8: 0xff 0xfe: Redis key is exactly lock:{<bytes>}
ok: invalid UTF-8: 0xff 0xfe: its fencing counter is lock:{<bytes>}:fence
ok: invalid UTF-8: 0xff 0xfe: fencing token is an int
ok: invalid UTF-8: 0xff 0xfe: a second object of the same key is refused
ok: invalid UTF-8: 0xff 0xfe: contender's synchronized(wait: 0) times out
ok: invalid UTF-8: 0xff 0xfe: ... with a valid UTF-8 message without control characters
ok: invalid UTF-8: 0xff 0xfe: a key differing in one byte is an independent lock
ok: invalid UTF-8: 0xff 0xfe: release
ok: invalid UTF-8: 0xff 0xfe: lock key gone
ok: RESP look-alike: accepted
ok: RESP look-alike: getKey() returns the same bytes
ok: RESP look-alike: acquire
ok: RESP look-alike: a fencing token
ok: RESP look-alike: Redis key is exactly lock:{<bytes>}
ok: RESP look-alike: its fencing counter is lock:{<bytes>}:fence
ok: RESP look-alike: fencing token is an int
ok: RESP look-alike: a second object of the same key is refused
ok: RESP look-alike: contender's synchronized(wait: 0) times out
ok: RESP look-alike: ... with a valid UTF-8 message without control characters
ok: RESP look-alike: a key differing in one byte is an independent lock
ok: RESP look-alike: release
ok: RESP look-alike: lock key gone
ok: braces and NUL: accepted
ok: braces and NUL: getKey() returns the same bytes
ok: braces and NUL: acquire
ok: braces and NUL: a fencing token
ok: braces and NUL: Redis key is exactly lock:{<bytes>}
ok: braces and NUL: its fencing counter is lock:{<bytes>}:fence
ok: braces and NUL: fencing token is an int
ok: braces and NUL: a second object of the same key is refused
ok: braces and NUL: contender's synchronized(wait: 0) times out
ok: braces and NUL: ... with a valid UTF-8 message without control characters
ok: braces and NUL: a key differing in one byte is an independent lock
ok: braces and NUL: release
ok: braces and NUL: lock key gone
ok: 1024 random bytes: accepted
ok: 1024 random bytes: getKey() returns the same bytes
ok: 1024 random bytes: acquire
ok: 1024 random bytes: a fencing token
ok: 1024 random bytes: Redis key is exactly lock:{<bytes>}
ok: 1024 random bytes: its fencing counter is lock:{<bytes>}:fence
ok: 1024 random bytes: fencing token is an int
ok: 1024 random bytes: a second object of the same key is refused
ok: 1024 random bytes: contender's synchronized(wait: 0) times out
ok: 1024 random bytes: ... with a valid UTF-8 message without control characters
ok: 1024 random bytes: a key differing in one byte is an independent lock
ok: 1024 random bytes: release
ok: 1024 random bytes: lock key gone
ok: every key left in Redis is a lock:{...}:fence counter
ok: every call used the same connection
done
