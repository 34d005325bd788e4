--TEST--
DistributedLock: fencing tokens are large integers, strictly increasing across objects, processes, expiry and a lost counter key
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('fence');
$rk = rl_lock_key($k);

$tokens = [];
$record = function (string $how, ?int $tok) use (&$tokens, $raw, $rk) {
    $val = (string) $raw->cmd('GET', $rk);
    $fence = explode(':', $val)[1] ?? null;
    if ($fence !== (string) $tok) {
        echo "FAIL: $how: token ", rl_fmt($tok), " differs from the fence in the lock value ", rl_fmt($val), "\n";
    }
    $tokens[] = [$how, $tok];
};

$a = new DistributedLock($k, 5.0, $dsn);
$b = new DistributedLock($k, 5.0, $dsn);
for ($i = 0; $i < 5; $i++) {
    $a->acquire();
    $record("A#$i", $a->getFencingToken());
    $a->release();
    $b->acquire();
    $record("B#$i", $b->getFencingToken());
    $b->release();
}

// Refresh keeps the token.
$a->acquire();
$t = $a->getFencingToken();
$a->refresh(10.0);
rl_same('refresh() keeps the fencing token', $t, $a->getFencingToken());
$record('A refresh', $a->getFencingToken());
$a->release();

// Tokens from another process continue the sequence.
$child = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', 5.0, ' . rl_export($dsn) . ');
for ($i = 0; $i < 3; $i++) {
    $l->acquire();
    echo $l->getFencingToken(), "\n";
    $l->release();
}
');
for ($i = 0; $i < 3; $i++) {
    $tokens[] = ["child#$i", (int) $child->readLine(10.0)];
}
rl_same('child exits cleanly', 0, $child->wait(10.0));

// After an expiry (no release), the next holder still gets a larger token.
$e = new DistributedLock($k, 0.2, $dsn);
$e->acquire();
$record('short', $e->getFencingToken());
rl_ok('short lease expired', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
$a->acquire();
$record('after expiry', $a->getFencingToken());
$a->release();

// Tokens are at least the Redis clock in microseconds, so losing the
// counter key (or all data, as after a restart without persistence) must
// not make them go backwards.
$raw->cmd('DEL', $rk . ':fence');
$a->acquire();
$record('after DEL of :fence', $a->getFencingToken());
$a->release();
$raw->cmd('FLUSHALL');
[$sec, $usec] = $raw->cmd('TIME');
$clock = (int) $sec * 1000000 + (int) $usec;
$a->acquire();
$record('after FLUSHALL', $a->getFencingToken());
rl_ok('token is at least the Redis clock in microseconds', $a->getFencingToken() >= $clock,
    rl_fmt($a->getFencingToken()) . ' < ' . $clock);
$a->release();

$bad = [];
foreach ($tokens as $i => [$how, $tok]) {
    if (!is_int($tok) || $tok < 1000000000000000) {
        $bad[] = "$how: " . rl_fmt($tok) . ' is not an int >= 1e15';
    }
    if ($i > 0 && !($tok > $tokens[$i - 1][1])) {
        $bad[] = "$how: " . rl_fmt($tok) . ' not greater than ' . $tokens[$i - 1][0] . ': ' . rl_fmt($tokens[$i - 1][1]);
    }
}
rl_ok(count($tokens) . ' tokens are ints >= 1e15 and strictly increasing', $bad === [], implode('; ', $bad));

// Tokens of different keys are independent but also well-formed.
$other = new DistributedLock($k . '-other', 5.0, $dsn);
$other->acquire();
rl_ok('another key: int token', is_int($other->getFencingToken()), rl_fmt($other->getFencingToken()));
$other->release();

unset($a, $b, $e, $other);
echo "done\n";
?>
--EXPECT--
ok: refresh() keeps the fencing token
ok: child exits cleanly
ok: short lease expired
ok: token is at least the Redis clock in microseconds
ok: 18 tokens are ints >= 1e15 and strictly increasing
ok: another key: int token
done
