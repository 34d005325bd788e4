--TEST--
Security: passwords and ACL secrets (every DSN form, wrong passwords, unreachable hosts, timeouts, error replies, malformed DSNs) never appear in exceptions, warnings, var_dump/print_r or phpinfo()
--INI--
zend.exception_ignore_args=1
session.use_cookies=0
session.cache_limiter=
--FILE--
<?php
/*
 * Each case is a DSN holding a distinctive secret that makes a call fail.
 * For each, the secret must be absent from:
 *  - the exception of DistributedLock (message, string form with trace,
 *    previous exceptions), also on a second call of the same object (which
 *    resolves an uncertain earlier outcome);
 *  - var_dump / print_r / var_export / json_encode of the objects;
 *  - every warning of a class-form session (session_start() with the handler);
 *  - every warning of a native-form session with the DSN in redis_lease.dsn and
 *    an empty session.save_path (then PHP's own "Failed to read session data
 *    ... (path: ...)" has nothing to print);
 *  - the whole phpinfo() of a child process with the DSN in redis_lease.dsn.
 * zend.exception_ignore_args=1 (the production setting) keeps PHP from
 * printing the constructor's arguments in traces: that would be PHP's output.
 */
require __DIR__ . '/inc/redis.inc';
// Session ini settings can only change before output is sent: buffer it.
ob_start();

$realPw = 'RealServerPw' . bin2hex(random_bytes(4));
$alicePw = 'AliceRealPw' . bin2hex(random_bytes(4));
$srv = rl_start_redis(['--requirepass', $realPw], $realPw);
$raw = new RlRaw($srv['port']);
$raw->cmd('AUTH', $realPw);
$raw->cmd('ACL', 'SETUSER', 'alice', 'on', '>' . $alicePw, '~*', '+@all');
$p = $srv['port'];
$closed = rl_free_port();

// A server that accepts connections and never answers: read timeouts.
$blackhole = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
$bhPort = (int) substr(strrchr(stream_socket_get_name($blackhole, false), ':'), 1);
// A listener with a full backlog: connects hang until connect_timeout.
$full = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN,
    stream_context_create(['socket' => ['backlog' => 0]]));
$fullPort = (int) substr(strrchr(stream_socket_get_name($full, false), ':'), 1);
$fill = [];
for ($i = 0; $i < 4; $i++) {
    $c = @stream_socket_client("tcp://127.0.0.1:$fullPort", $en, $es, 0.2);
    if ($c === false) {
        break;
    }
    $fill[] = $c;
}
rl_ok('test setup: connects to the full-backlog listener hang', @stream_socket_client("tcp://127.0.0.1:$fullPort", $en, $es, 0.2) === false);

// A lock key holding a list: an error reply (WRONGTYPE) with the right password.
$raw->cmd('RPUSH', 'lock:{wrongtype}', 'x');

$C = RedisLease\ConnectionException::class;
$V = ValueError::class;
/* label => [dsn, secrets that must never show, expected exception, endpoint the message must name] */
$cases = [
    'wrong password, redis://:pw@' => ["redis://:WrongPwA7q@127.0.0.1:$p", ['WrongPwA7q'], $C, "127.0.0.1:$p"],
    'wrong ACL password, redis://user:pw@' => ["redis://alice:WrongPwB7q@127.0.0.1:$p/1", ['WrongPwB7q'], $C, "127.0.0.1:$p"],
    'unknown ACL user' => ["redis://nobody:WrongPwC7q@127.0.0.1:$p", ['WrongPwC7q'], $C, "127.0.0.1:$p"],
    'phpredis tcp://h:p?auth=' => ["tcp://127.0.0.1:$p?auth=WrongPwD7q&database=2", ['WrongPwD7q'], $C, "127.0.0.1:$p"],
    'phpredis auth[]=user&auth[]=pw' => ["tcp://127.0.0.1:$p?auth[]=alice&auth[]=WrongPwE7q", ['WrongPwE7q'], $C, "127.0.0.1:$p"],
    'phpredis auth%5B%5D (encoded brackets)' => ["tcp://127.0.0.1:$p?auth%5B%5D=alice&auth%5B%5D=WrongPwF7q", ['WrongPwF7q'], $C, "127.0.0.1:$p"],
    'user= and auth= query' => ["redis://127.0.0.1:$p?user=alice&auth=WrongPwG7q", ['WrongPwG7q'], $C, "127.0.0.1:$p"],
    'percent-encoded password' => ["redis://alice:Pct%2FPw%40H7q@127.0.0.1:$p", ['Pct%2FPw%40H7q', 'Pct/Pw@H7q', 'Pct'], $C, "127.0.0.1:$p"],
    'nothing listening' => ["redis://:RefusedPwI7q@127.0.0.1:$closed", ['RefusedPwI7q'], $C, "127.0.0.1:$closed"],
    'unix socket that does not exist' => ['unix:///nonexistent/rl-sec.sock?auth=UnixPwJ7q', ['UnixPwJ7q'], $C, 'unix:///nonexistent/rl-sec.sock'],
    'read timeout (server never answers)' => ["redis://:SilentPwK7q@127.0.0.1:$bhPort?read_timeout=0.3", ['SilentPwK7q'], $C, "127.0.0.1:$bhPort"],
    'connect timeout' => ["tcp://127.0.0.1:$fullPort?auth=HangPwL7q&timeout=0.3", ['HangPwL7q'], $C, "127.0.0.1:$fullPort"],
    'right ACL password, WRONGTYPE error reply' => ["redis://alice:$alicePw@127.0.0.1:$p", [$alicePw], $C, 'WRONGTYPE'],
    // Malformed: special characters left unencoded in the password.
    "malformed: '/' in the password" => ["redis://app:LeakM1q/LeakM2q@127.0.0.1:$p", ['LeakM1q', 'LeakM2q'], $V, ''],
    "malformed: '?' in the password" => ["redis://app:LeakN1q?LeakN2q@127.0.0.1:$p", ['LeakN1q', 'LeakN2q'], $V, ''],
    'malformed: host left out' => ['redis://app:LeakO1q', ['LeakO1q'], $V, ''],
    'malformed: bad port after the password' => ['redis://:LeakP1q@127.0.0.1:LeakP2q', ['LeakP1q', 'LeakP2q'], $V, ''],
    "malformed: '=' lost after auth" => ["tcp://127.0.0.1:$p?authLeakQ1q", ['LeakQ1q'], $V, ''],
    'malformed: bad escape in the password' => ["redis://:LeakR1q%zz@127.0.0.1:$p", ['LeakR1q'], $V, ''],
];

/** The secrets of $secrets found in $text. */
function found(string $text, array $secrets): array
{
    return array_values(array_filter($secrets, static fn($s) => str_contains($text, $s)));
}

/** Everything an exception shows: class, message, string form (with trace), previous ones. */
function exception_text(Throwable $e): string
{
    $out = '';
    for ($x = $e; $x !== null; $x = $x->getPrevious()) {
        $out .= get_class($x) . ': ' . $x->getMessage() . "\n" . $x . "\n";
    }
    return $out;
}

$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});

$fails = ['exception' => [], 'kind' => [], 'second' => [], 'dump' => [], 'class' => [], 'native' => [], 'phpinfo' => []];
$wrongtypeKey = 'wrongtype';
foreach ($cases as $label => [$dsn, $secrets, $class, $names]) {
    // --- DistributedLock ---
    $lock = null;
    try {
        $lock = new DistributedLock($class === $C && $names === 'WRONGTYPE' ? $wrongtypeKey : 'sec', 5.0, $dsn);
        $lock->acquire();
        $fails['kind'][] = "$label: no exception";
    } catch (Throwable $e) {
        if (!($e instanceof $class)) {
            $fails['kind'][] = "$label: expected $class, got " . get_class($e) . ': ' . $e->getMessage();
        } elseif ($names !== '' && !str_contains($e->getMessage(), $names)) {
            $fails['kind'][] = "$label: the message does not name '$names': " . $e->getMessage();
        }
        if ($f = found(exception_text($e), $secrets)) {
            $fails['exception'][] = "$label: " . implode(', ', $f) . ' in: ' . $e->getMessage();
        }
    }
    if ($lock !== null) {
        // A second call on the same object (resolves any uncertain first attempt).
        foreach (['acquire' => fn() => $lock->acquire(), 'release' => fn() => $lock->release(),
                  'isAcquired' => fn() => $lock->isAcquired()] as $m => $fn) {
            try {
                $fn();
            } catch (Throwable $e) {
                if ($f = found(exception_text($e), $secrets)) {
                    $fails['second'][] = "$label, $m(): " . implode(', ', $f) . ' in: ' . $e->getMessage();
                }
            }
        }
        ob_start();
        var_dump($lock);
        print_r($lock);
        var_export($lock);
        echo json_encode($lock), serialize(RedisLease\metrics()), RedisLease\prometheus_metrics();
        $dump = ob_get_clean();
        if ($f = found($dump, $secrets)) {
            $fails['dump'][] = "$label: " . implode(', ', $f);
        }
        unset($lock);
    }

    // --- class-form session ---
    $warnings = [];
    try {
        $h = new RedisLockingSessionHandler($dsn);
        ob_start();
        var_dump($h);
        print_r($h);
        $dump = ob_get_clean();
        if ($f = found($dump, $secrets)) {
            $fails['dump'][] = "$label (handler): " . implode(', ', $f);
        }
        session_set_save_handler($h, true);
        session_id(bin2hex(random_bytes(16)));
        if (@session_start() === true) {
            $_SESSION['x'] = 1;
            session_write_close();
        }
        session_abort();
    } catch (Throwable $e) {
        if ($f = found(exception_text($e), $secrets)) {
            $fails['class'][] = "$label (exception): " . implode(', ', $f) . ' in: ' . $e->getMessage();
        }
    }
    foreach ($warnings as $w) {
        if ($f = found($w, $secrets)) {
            $fails['class'][] = "$label: " . implode(', ', $f) . ' in: ' . $w;
        }
    }
    unset($h);

    // --- native-form session: redis_lease.dsn, empty save_path ---
    if (!str_contains($dsn, "\0")) {
        $warnings = [];
        ini_set('session.save_handler', 'redis_lease');
        ini_set('session.save_path', '');
        ini_set('redis_lease.dsn', $dsn);
        session_id(bin2hex(random_bytes(16)));
        try {
            if (session_start() === true) {
                $_SESSION['x'] = 1;
                session_write_close();
            }
        } catch (Throwable $e) {
            $warnings[] = exception_text($e);
        }
        ini_restore('redis_lease.dsn');
        foreach ($warnings as $w) {
            if ($f = found($w, $secrets)) {
                $fails['native'][] = "$label: " . implode(', ', $f) . ' in: ' . $w;
            }
        }
        if ($warnings === [] && $names !== 'WRONGTYPE') { // (that DSN's password is right: its session works)
            $fails['native'][] = "$label: no warning at all (the session should have failed)";
        }
    }

    // --- phpinfo() of a child with the DSN in redis_lease.dsn ---
    $child = rl_spawn_php('phpinfo();', ['redis_lease.dsn' => $dsn]);
    $info = $child->readAll(10.0);
    $child->wait(5.0);
    if (!str_contains($info, 'redis_lease support')) {
        $fails['phpinfo'][] = "$label: no redis_lease section in phpinfo(): " . substr($info, 0, 200);
    }
    if ($f = found($info, $secrets)) {
        $lines = array_filter(explode("\n", $info), static fn($l) => found($l, $secrets) !== []);
        $fails['phpinfo'][] = "$label: " . implode(', ', $f) . ' in: ' . implode(' | ', $lines);
    }
}
restore_error_handler();

/** "ok: $label" when $list is empty, else "FAIL: $label" with each entry on its own line. */
function none_failed(string $label, array $list): void
{
    rl_ok($label, $list === [], count($list) . " failure(s):\n    " . implode("\n    ", $list));
}
$n = count($cases);
none_failed("each of the $n DSNs fails with the expected exception, naming the endpoint", $fails['kind']);
none_failed('no secret in any exception (message, string form, previous)', $fails['exception']);
none_failed('no secret in exceptions of a second call on the same object', $fails['second']);
none_failed('no secret in var_dump/print_r/var_export/json_encode of the objects or in the metrics', $fails['dump']);
none_failed('no secret in any warning of a class-form session', $fails['class']);
none_failed('no secret in any warning of a native session (redis_lease.dsn, empty save_path), PHP\'s included', $fails['native']);
none_failed('no secret anywhere in phpinfo()', $fails['phpinfo']);
foreach ($fill as $c) {
    fclose($c);
}
echo "done\n";
?>
--EXPECT--
ok: test setup: connects to the full-backlog listener hang
ok: each of the 19 DSNs fails with the expected exception, naming the endpoint
ok: no secret in any exception (message, string form, previous)
ok: no secret in exceptions of a second call on the same object
ok: no secret in var_dump/print_r/var_export/json_encode of the objects or in the metrics
ok: no secret in any warning of a class-form session
ok: no secret in any warning of a native session (redis_lease.dsn, empty save_path), PHP's included
ok: no secret anywhere in phpinfo()
done
