--TEST--
Bad input: 10,000+ mutated DSNs give an object or a ValueError (never another throwable, a crash or the password); the pooled connection keeps working
--INI--
zend.exception_ignore_args=1
--FILE--
<?php
/*
 * Fuzzes the DSN parser from PHP. Valid DSNs of every supported form, each
 * with a password marker, are mutated by random byte insertions, deletions
 * and replacements (NUL, %, @, :, /, ?, &, =, [, ], unicode, invalid UTF-8,
 * ...). Every mutated DSN is given to DistributedLock and to
 * RedisLockingSessionHandler: each must either construct or throw ValueError,
 * and no message may contain the marker. A sample also goes through the
 * redis_lease.dsn ini setting and through the native session handler's
 * session.save_path (a warning and a failed session_start(), no exception).
 *
 * After every case a reference lock does acquire()+release() on the private
 * Redis; the `connects` counter shows it stays on the same connection.
 *
 * The generator is seeded, so a failure names a reproducible case.
 */
require __DIR__ . '/inc/redis.inc';
// Session ini settings can only change before output is sent: buffer it all.
ob_start();

const MARK = 'Zq7PwMarkXy';     // the "password": must never show up in a message
const SEED = 20261130;
const CASES = 10000;

$srv = rl_start_redis();
// The seeds are only parsed, never connected to: a fixed port keeps the
// generated cases the same from run to run.
$port = 6390;
$ref = new DistributedLock(rl_key('fuzz-ref'), 5.0, $srv['dsn']);
rl_same('reference lock acquires before the fuzzing', true, $ref->acquire());
rl_same('reference lock releases before the fuzzing', true, $ref->release());
$connectsBefore = RedisLease\metrics()['connects'];

// Valid DSNs of every documented form; all but the first carry the marker.
$seeds = [
    "redis://127.0.0.1:$port",
    'redis://:' . MARK . "@127.0.0.1:$port/0",
    'redis://app:' . MARK . "@127.0.0.1:$port/2?read_timeout=0.5&connect_timeout=0.5",
    "tcp://127.0.0.1:$port?auth=" . MARK . '&database=1&prefix=SESS_&timeout=1&persistent=1&weight=1&retry_interval=100',
    "tcp://127.0.0.1:$port?auth[]=app&auth[]=" . MARK,
    "tcp://127.0.0.1:$port?auth%5B%5D=app&auth%5B%5D=" . MARK,
    'unix:///tmp/rl-fuzz.sock?auth=' . MARK . '&database=3',
    'redis://:' . MARK . "@[::1]:$port/1",
    "127.0.0.1:$port?user=app&auth=" . MARK,
    'redis://us%40er:' . MARK . "%2F%3F%40@localhost:$port/5?db=4",
];
foreach ($seeds as $i => $s) {
    try {
        new DistributedLock('k', 5.0, $s);
        $ok = true;
    } catch (Throwable $e) {
        $ok = false;
        echo 'seed ', $i, ': ', get_class($e), ': ', $e->getMessage(), "\n";
    }
    if (!$ok) {
        rl_ok("seed DSN #$i is valid (test setup)", false);
    }
}

// Pieces inserted or substituted by the mutations.
$tokens = ["\0", '%', '%00', '%zz', '%2', '%ff', '%C3%A9', '@', '@@', ':', '::', '/', '//', '?', '&', '=',
    '[', ']', '[::1]', '#', ' ', "\t", "\n", "\r\n", ',', '.', '-', '+', '\\', '{', '}', '*', '"', "'",
    'é', '🔒', "\u{202e}", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf", '0', '65535', '65536',
    '99999999999999999999', '-1', 'NaN', 'inf', '1e308', 'redis://', 'tcp://', 'unix://', 'rediss://',
    'auth=', 'auth[]=', 'database=', 'timeout=', 'read_timeout=', 'prefix=', 'user=', 'x', 'Z'];

/** One random edit of $s: insert, delete, replace, duplicate or truncate. */
function mutate(string $s, array $tokens): string
{
    $len = strlen($s);
    $pos = mt_rand(0, $len);
    $tok = $tokens[mt_rand(0, count($tokens) - 1)];
    switch (mt_rand(0, 5)) {
        case 0: // insert a token
            return substr($s, 0, $pos) . $tok . substr($s, $pos);
        case 1: // delete 1-4 bytes
            return substr($s, 0, $pos) . substr($s, $pos + mt_rand(1, 4));
        case 2: // replace 1-3 bytes by a token
            return substr($s, 0, $pos) . $tok . substr($s, $pos + mt_rand(1, 3));
        case 3: // replace one byte by a random byte (any of the 256)
            return $len === 0 ? chr(mt_rand(0, 255)) : substr_replace($s, chr(mt_rand(0, 255)), min($pos, $len - 1), 1);
        case 4: // duplicate a slice
            $from = mt_rand(0, $len);
            return substr($s, 0, $pos) . substr($s, $from, mt_rand(1, 12)) . substr($s, $pos);
        default: // truncate
            return substr($s, 0, $pos);
    }
}

mt_srand(SEED);
$cases = [];
while (count($cases) < CASES) {
    $dsn = $seeds[mt_rand(0, count($seeds) - 1)];
    $edits = mt_rand(1, 4);
    for ($e = 0; $e < $edits; $e++) {
        $dsn = mutate($dsn, $tokens);
    }
    $cases[$dsn] = true; // distinct cases only
}
$cases = array_keys($cases);
// array_keys() turns numeric-string keys into ints: make them strings again.
$cases = array_map('strval', $cases);
rl_ok(sprintf('%d distinct mutated DSNs generated (seed %d)', CASES, SEED), count($cases) === CASES);

/**
 * Construct with $make($dsn); returns null when it constructed, the
 * ValueError when it threw one, and records anything else in $bad.
 */
function try_construct(callable $make, string $dsn, array &$stats, array &$bad, array &$leaks): void
{
    try {
        $make($dsn);
        $stats['ok']++;
    } catch (ValueError $e) {
        $stats['value_error']++;
        $msg = $e->getMessage();
        if (str_contains($msg, MARK) || str_contains((string) $e, MARK)) {
            $leaks[] = [$dsn, $msg];
        }
        if (preg_match('//u', $msg) !== 1) {
            $bad[] = [$dsn, 'ValueError message is not valid UTF-8: ' . bin2hex($msg)];
        }
    } catch (Throwable $e) {
        $bad[] = [$dsn, get_class($e) . ': ' . $e->getMessage()];
        if (str_contains($e->getMessage(), MARK)) {
            $leaks[] = [$dsn, $e->getMessage()];
        }
    }
}

/** $s with every byte outside printable ASCII shown as \xHH. */
function show(string $s): string
{
    return "'" . preg_replace_callback('/[^\x20-\x7e]/', static fn($m) => sprintf('\\x%02x', ord($m[0])), $s) . "'";
}

/** Up to 5 failing cases as "dsn => what" lines, bytes escaped. */
function examples(array $list): string
{
    $out = '';
    foreach (array_slice($list, 0, 5) as [$dsn, $what]) {
        $out .= "\n    " . show($dsn) . ' => ' . show($what);
    }
    return count($list) . ' case(s)' . $out;
}

$forms = [
    'DistributedLock' => static fn(string $d) => new DistributedLock('k', 5.0, $d),
    'RedisLockingSessionHandler' => static fn(string $d) => new RedisLockingSessionHandler($d),
    // The ini route: the constructor takes its DSN from redis_lease.dsn.
    'redis_lease.dsn ini' => static function (string $d) {
        $old = ini_set('redis_lease.dsn', $d);
        try {
            return new DistributedLock('k');
        } finally {
            ini_set('redis_lease.dsn', (string) $old);
        }
    },
];
$results = [];
foreach ($forms as $name => $_) {
    $results[$name] = ['stats' => ['ok' => 0, 'value_error' => 0], 'bad' => [], 'leaks' => []];
}
$refFailures = [];
$malformed = []; // DSNs that DistributedLock refused: used for the session sample below
foreach ($cases as $i => $dsn) {
    foreach ($forms as $name => $make) {
        $r = &$results[$name];
        $before = $r['stats']['value_error'];
        try_construct($make, $dsn, $r['stats'], $r['bad'], $r['leaks']);
        if ($name === 'DistributedLock' && $r['stats']['value_error'] > $before) {
            $malformed[] = $dsn;
        }
        unset($r);
    }
    // A normal call right after the bad one must still work.
    try {
        $got = [$ref->acquire(), $ref->release()];
        if ($got !== [true, true]) {
            $refFailures[] = [$dsn, 'acquire/release gave ' . json_encode($got)];
        }
    } catch (Throwable $e) {
        $refFailures[] = [$dsn, get_class($e) . ': ' . $e->getMessage()];
    }
}

foreach ($results as $name => $r) {
    $s = $r['stats'];
    rl_ok(sprintf('%s: every DSN constructed or threw ValueError (%d constructed, %d ValueError)', $name, $s['ok'], $s['value_error']),
        $r['bad'] === [], examples($r['bad']));
    rl_ok("$name: no message contains the password marker", $r['leaks'] === [], examples($r['leaks']));
}
rl_ok('at least 1000 of the mutations were refused (the fuzzing reaches the error paths)', count($malformed) >= 1000,
    (string) count($malformed));
rl_ok('the reference lock acquired and released after every case', $refFailures === [], examples($refFailures));
rl_same('... on the same connection (the connects counter did not move)', $connectsBefore, RedisLease\metrics()['connects']);

/*
 * The native session handler with a malformed session.save_path: session_start()
 * returns false with a warning of ours, throws nothing, and our warning does not
 * contain the marker. (PHP's own "Failed to initialize storage module: redis_lease
 * (path: ...)" prints session.save_path itself: that message is PHP's, so only
 * warnings starting with "redis_lease:" are checked for the marker.)
 */
ini_set('session.use_cookies', '0');
// (session ids come from session_id(): no cookie settings needed)
ini_set('session.cache_limiter', '');
ini_set('session.save_handler', 'redis_lease');
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$sample = array_slice($malformed, 0, 300);
$sessBad = [];
$sessLeaks = [];
$sessRef = [];
foreach ($sample as $dsn) {
    if (str_contains($dsn, "\0") || trim($dsn) === '') {
        continue; // ini values cannot hold NUL; an empty save_path means "use redis_lease.dsn"
    }
    $warnings = [];
    ini_set('session.save_path', $dsn);
    try {
        $started = session_start();
    } catch (Throwable $e) {
        $sessBad[] = [$dsn, 'session_start() threw ' . get_class($e) . ': ' . $e->getMessage()];
        continue;
    }
    $ours = array_values(array_filter($warnings, static fn($w) => str_contains($w, 'redis_lease:')));
    if ($started !== false || $ours === []) {
        $sessBad[] = [$dsn, 'session_start() returned ' . var_export($started, true) . ' with warnings ' . json_encode($warnings)];
        if ($started) {
            session_abort();
        }
    }
    foreach ($ours as $w) {
        if (str_contains($w, MARK)) {
            $sessLeaks[] = [$dsn, $w];
        }
    }
    try {
        if ([$ref->acquire(), $ref->release()] !== [true, true]) {
            $sessRef[] = [$dsn, 'acquire/release failed'];
        }
    } catch (Throwable $e) {
        $sessRef[] = [$dsn, get_class($e) . ': ' . $e->getMessage()];
    }
}
restore_error_handler();
rl_ok('native handler, malformed save_path: session_start() is false with a redis_lease warning, never an exception',
    $sessBad === [], examples($sessBad));
rl_ok('native handler, malformed save_path: our warnings never contain the marker', $sessLeaks === [], examples($sessLeaks));
rl_ok('the reference lock still works after each failed session_start()', $sessRef === [], examples($sessRef));

// The session handler still works with a good save_path afterwards.
ini_set('session.save_path', $srv['dsn']);
session_id('fuzzgood' . bin2hex(random_bytes(8)));
rl_same('native session with a good save_path starts after all that', true, @session_start());
$_SESSION['ok'] = 1;
rl_same('... and is written', true, session_write_close());
rl_same('still one connection for all of it', $connectsBefore, RedisLease\metrics()['connects']);
echo "done\n";
?>
--EXPECTF--
ok: reference lock acquires before the fuzzing
ok: reference lock releases before the fuzzing
ok: 10000 distinct mutated DSNs generated (seed 20261130)
ok: DistributedLock: every DSN constructed or threw ValueError (%d constructed, %d ValueError)
ok: DistributedLock: no message contains the password marker
ok: RedisLockingSessionHandler: every DSN constructed or threw ValueError (%d constructed, %d ValueError)
ok: RedisLockingSessionHandler: no message contains the password marker
ok: redis_lease.dsn ini: every DSN constructed or threw ValueError (%d constructed, %d ValueError)
ok: redis_lease.dsn ini: no message contains the password marker
ok: at least 1000 of the mutations were refused (the fuzzing reaches the error paths)
ok: the reference lock acquired and released after every case
ok: ... on the same connection (the connects counter did not move)
ok: native handler, malformed save_path: session_start() is false with a redis_lease warning, never an exception
ok: native handler, malformed save_path: our warnings never contain the marker
ok: the reference lock still works after each failed session_start()
ok: native session with a good save_path starts after all that
ok: ... and is written
ok: still one connection for all of it
done
