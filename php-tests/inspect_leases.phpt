--TEST--
Operators' view: RedisLease\inspect() shows a lock's, a read/write lock's, a semaphore's and a session's holders (mode, first 8 characters of the token, fence, lease left) and waiters in queue order (modes and waits exact), an expired holder, an empty key; RedisLease\leases() finds them with SCAN and puts the contended key first; no whole token, session id or password in any output; bad input and a key of another type refused clearly; nothing written
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis(['--requirepass', 'insp3ct-s3cret', '--enable-debug-command', 'yes'], 'insp3ct-s3cret');
$raw = new RlRaw($srv['port']);
$raw->cmd('AUTH', 'insp3ct-s3cret');
$dsn = "redis://:insp3ct-s3cret@127.0.0.1:{$srv['port']}";
rl_ok('the DSN carries the password', str_contains($dsn, 'insp3ct-s3cret'));

/** A child process that runs $code (with $dsn, $k), prints "go" first and its result last. */
function child(string $code, string $k, string $dsn): RlChild
{
    $c = rl_spawn_php('$dsn = ' . rl_export($dsn) . '; $k = ' . rl_export($k) . '; echo "go\n"; ' . $code . ' fgets(STDIN);');
    $c->expectLine('go');
    return $c;
}

function waiting(RlRaw $raw, string $queue, int $n): bool
{
    return rl_wait_until(fn() => (int) $raw->cmd('ZCARD', $queue) === $n, 10.0);
}

/** Every secret the outputs must not carry. */
$secrets = ['insp3ct-s3cret'];
function leak_free(string $label, mixed $out, array $secrets): void
{
    $text = json_encode($out);
    $found = array_values(array_filter($secrets, fn($s) => str_contains($text, $s)));
    rl_same("$label: no whole token, session id or password in it", [], $found);
}

// --- an empty key ---
$nothing = rl_key('nothing');
$empty = RedisLease\inspect($nothing, 'lock', $dsn);
rl_same('an empty key: no holder, no waiter', [[], [], 0, 0], [$empty['holders'], $empty['waiters'], $empty['holders_total'], $empty['waiters_total']]);
rl_same('an empty key: the key shown', 'lock:{' . $nothing . '}', $empty['key']);

// --- an exclusive lock with two waiters, a writer then a reader ---
$k = rl_key('busy');
$holder = new DistributedLock($k, 30.0, $dsn);
rl_ok('held', $holder->acquire());
$fence = $holder->getFencingToken();
$full = explode(':', $raw->cmd('GET', "lock:{{$k}}"))[0];
$secrets[] = $full;
$w1 = child('$l = new DistributedLock($k, 20.0, $dsn); $l->acquire(30.0);', $k, $dsn);
waiting($raw, "lock:{{$k}}:waiters", 1);
usleep(20000); // the two waiters' arrivals apart by more than the clock's ms
$w2 = child('$l = new DistributedLock($k, 20.0, $dsn); $l->acquireRead(30.0);', $k, $dsn);
rl_ok('two waiters queued', waiting($raw, "lock:{{$k}}:waiters", 2));
foreach ($raw->cmd('ZRANGE', "lock:{{$k}}:waiters", 0, -1) as $t) {
    $secrets[] = $t;
}
$i = RedisLease\inspect($k, 'lock', $dsn);
rl_same('holder: one writer, its token cut to 8 characters, its fence', [['write', substr($full, 0, 8), $fence, 1]],
    array_map(fn($h) => [$h['mode'], $h['token'], $h['fence'], $h['permits']], $i['holders']));
rl_ok('holder: its lease left', $i['holders'][0]['ttl'] > 25.0 && $i['holders'][0]['ttl'] <= 30.0, rl_fmt($i['holders'][0]['ttl']));
rl_ok('holder: held since its fence was assigned', $i['holders'][0]['held'] !== null && $i['holders'][0]['held'] < 10.0, rl_fmt($i['holders'][0]['held']));
rl_same('waiters in queue order: the writer, then the reader', ['write', 'read'], array_column($i['waiters'], 'mode'));
rl_same('waiters: two in all', 2, $i['waiters_total']);
rl_ok('waiters: the first has waited longer', $i['waiters'][0]['waited'] > $i['waiters'][1]['waited'], rl_fmt(array_column($i['waiters'], 'waited')));
rl_ok('waiters: each will give up within its wait', $i['waiters'][1]['gives_up_in'] > 20.0 && $i['waiters'][1]['gives_up_in'] <= 30.0);
rl_same('waiters: the ttl each asks for', [20.0, 20.0], array_column($i['waiters'], 'ttl'));
rl_same('the last fence', $fence, $i['last_fence']);
leak_free('inspect()', $i, $secrets);

// --- a read/write lock: two readers, a writer waiting ---
$rk = rl_key('shared');
$r1 = new DistributedLock($rk, 30.0, $dsn);
$r2 = new DistributedLock($rk, 10.0, $dsn);
rl_ok('two readers', $r1->acquireRead() && $r2->acquireRead());
$w3 = child('$l = new DistributedLock($k, 20.0, $dsn); $l->acquire(30.0);', $rk, $dsn);
rl_ok('a writer queued behind the readers', waiting($raw, "lock:{{$rk}}:waiters", 1));
$i = RedisLease\inspect($rk, 'lock', $dsn);
rl_same('two read holders, first to expire first', ['read', 'read'], array_column($i['holders'], 'mode'));
rl_ok('read holders: their leases left', $i['holders'][0]['ttl'] <= 10.0 && $i['holders'][1]['ttl'] > 10.0, rl_fmt(array_column($i['holders'], 'ttl')));
rl_same('one writer waiting', ['write'], array_column($i['waiters'], 'mode'));

// --- an expired read hold, not yet dropped (another reader keeps the set) ---
$ek = rl_key('expired');
$e1 = new DistributedLock($ek, 0.2, $dsn);
$e2 = new DistributedLock($ek, 30.0, $dsn);
rl_ok('a short read hold beside a long one', $e1->acquireRead() && $e2->acquireRead());
$ends = (float) $raw->cmd('ZRANGE', "lock:{{$ek}}:holders", 0, 0, 'WITHSCORES')[1];
$nowMs = function () use ($raw): float { $t = $raw->cmd('TIME'); return $t[0] * 1000 + $t[1] / 1000; };
rl_ok('the short lease ran out', rl_wait_until(fn() => $nowMs() > $ends + 5, 5.0));
$i = RedisLease\inspect($ek, 'lock', $dsn);
rl_same('an expired holder is not a holder, and is counted', [1, 1, 1], [count($i['holders']), $i['holders_total'], $i['expired_holds']]);
rl_ok('the long one released', $e2->release());

// --- a semaphore: 2 of 3 permits held as one weighted hold, a waiter for 2 ---
$sk = rl_key('sem');
$s = new DistributedSemaphore($sk, 3, 30.0, $dsn);
rl_ok('2 permits at once', $s->acquire(0.0, 2));
$w4 = child('$s = new DistributedSemaphore($k, 3, 20.0, $dsn); $s->acquire(30.0, 2);', $sk, $dsn);
rl_ok('a waiter for 2 permits queued', waiting($raw, "lock:{{$sk}}:semaphore:waiters", 1));
$i = RedisLease\inspect($sk, 'semaphore', $dsn);
rl_same('the semaphore: one hold of 2 permits', [['permits', 2]], array_map(fn($h) => [$h['mode'], $h['permits']], $i['holders']));
rl_same('the semaphore: 2 permits held, its limit as the waiter has it', [2, 3], [$i['permits'], $i['limit']]);
rl_same('the semaphore: the waiter wants 2 of 3', [['permits', 2, 3]], array_map(fn($w) => [$w['mode'], $w['permits'], $w['limit']], $i['waiters']));

// --- a session: locked, one request waiting ---
$sid = 'sessinsp' . bin2hex(random_bytes(8));
$secrets[] = $sid;
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", 'n|i:' . str_repeat('7', 95) . ';', 'EX', 600);
$h = new RedisLockingSessionHandler($dsn, ['lock_wait' => 30]);
$h->open('', 'PHPSESSID');
$h->read($sid);
$w5 = child('$h = new RedisLockingSessionHandler($dsn, ["lock_wait" => 30]); $h->open("", "PHPSESSID"); $h->read($k);', $sid, $dsn);
rl_ok('a request waits for the session', waiting($raw, "{PHPREDIS_SESSION:$sid}:lock:waiters", 1));
$i = RedisLease\inspect($sid, 'session', $dsn);
rl_same('the session: its key with the id cut to 6 characters', '{PHPREDIS_SESSION:' . substr($sid, 0, 6) . '…}:lock', $i['key']);
rl_same('the session: one holder, one waiter', [['write'], ['write']], [array_column($i['holders'], 'mode'), array_column($i['waiters'], 'mode')]);
rl_same('the session: its data size', 100, $i['session']['size']);
leak_free('inspect() of a session', $i, $secrets);
// A session under the DSN's prefix=, where its store keeps it (before, inspect() and leases() looked
// under the ini setting alone, and showed it free).
$psid = 'sessdsnp' . bin2hex(random_bytes(8));
$secrets[] = $psid;
$pdsn = "$dsn?prefix=APPSESS:";
$ph = new RedisLockingSessionHandler($pdsn);
$ph->open('', 'PHPSESSID');
$ph->read($psid);
$pkey = '{APPSESS:' . substr($psid, 0, 6) . '…}:lock';
$i = RedisLease\inspect($psid, 'session', $pdsn);
rl_same("a session under the DSN's prefix=: held, as its store keeps it", [$pkey, ['write']], [$i['key'], array_column($i['holders'], 'mode')]);
$pfound = RedisLease\leases(null, $pdsn);
rl_ok('... listed by leases() with that DSN', in_array($pkey, array_column($pfound['leases'], 'key'), true), rl_fmt(array_column($pfound['leases'], 'key')));
rl_same('... found counts what it lists', count($pfound['leases']), $pfound['found']);
$ph->close();

// --- leases(): everything live, the contended key first ---
$all = RedisLease\leases(null, $dsn);
rl_same('leases(): complete', [false, []], [$all['partial'], $all['why_partial']]);
$keys = array_column($all['leases'], 'key');
rl_same('leases(): the key with two waiters first', 'lock:{' . $k . '}', $keys[0] ?? null);
foreach (['lock:{' . $rk . '}', 'lock:{' . $sk . '}:semaphore', '{PHPREDIS_SESSION:' . substr($sid, 0, 6) . '…}:lock'] as $want) {
    rl_ok("leases(): finds $want", in_array($want, $keys, true), rl_fmt($keys));
}
rl_ok('leases(): not the empty key, nor the expired hold', !in_array('lock:{' . $nothing . '}', $keys, true) && !in_array('lock:{' . $ek . '}', $keys, true));
rl_same('leases(): sorted by waiters', array_column($all['leases'], 'waiters_total'), (function ($w) { rsort($w); return $w; })(array_column($all['leases'], 'waiters_total')));
leak_free('leases()', $all, $secrets);
$one = RedisLease\leases('lock:{' . $sk, $dsn, 1);
rl_same('leases() under a prefix, limited', ['lock:{' . $sk . '}:semaphore'], array_column($one['leases'], 'key'));

// --- the CLI ---
$cli = rl_php_cmd() . ' ' . escapeshellarg(__DIR__ . '/../bin/redis-lease');
$out = shell_exec("$cli --dsn=" . escapeshellarg($dsn) . ' top --count=1 --limit=3 2>&1');
$lines = explode("\n", (string) $out);
rl_ok('redis-lease top: the contended key on the first row', str_starts_with($lines[3] ?? '', 'lock:{' . $k . '}'), (string) $out);
rl_ok('redis-lease top: its two waiters', (bool) preg_match('/^lock:\{' . preg_quote($k) . '\}\s+lock\s+1 write\s+2\s/', $lines[3] ?? ''), $lines[3] ?? '');
leak_free('redis-lease top', $out, $secrets);
$out = shell_exec("$cli --dsn=" . escapeshellarg($dsn) . ' show ' . escapeshellarg($k) . ' 2>&1');
rl_ok('redis-lease show: holders and waiters', str_contains((string) $out, "holders (1)") && str_contains((string) $out, "waiters (2), in queue order"), (string) $out);
leak_free('redis-lease show', $out, $secrets);
$json = json_decode((string) shell_exec("$cli --json --dsn=" . escapeshellarg($dsn) . ' show ' . escapeshellarg($sid) . ' --kind=session'), true);
rl_same('redis-lease show --json: the session', ['session', 1], [$json['kind'] ?? null, $json['waiters_total'] ?? null]);
$out = shell_exec("$cli --dsn=redis://:wr0ng-pass@127.0.0.1:{$srv['port']} show x 2>&1; echo \"exit \$?\"");
rl_ok('redis-lease: a failure is said, without the password', str_contains((string) $out, 'exit 1') && !str_contains((string) $out, 'wr0ng-pass'), (string) $out);
$out = shell_exec("$cli top --bogus 2>&1; echo \"exit \$?\"");
rl_ok('redis-lease: a bad option is a usage error', str_contains((string) $out, 'unknown option --bogus') && str_contains((string) $out, 'exit 2'), (string) $out);
// A mistyped option (upper case) is taken for a command: the usage error does not repeat it, for it
// may carry a DSN's password.
$out = (string) shell_exec("$cli --DSN=redis://:hunter2@127.0.0.1:1 top 2>&1; echo \"exit \$?\"");
rl_ok('redis-lease: a mistyped option is not echoed', str_contains($out, 'unknown command') && !str_contains($out, 'hunter2') && str_contains($out, 'exit 2'), $out);
$out = (string) shell_exec("$cli tpo 2>&1; echo \"exit \$?\"");
rl_ok('redis-lease: a mistyped command is named', str_contains($out, "unknown command 'tpo'"), $out);
/** The CLI's output for $args, $stdin on its standard input (bytes as they are: escapeshellarg() drops what the locale cannot read). */
$cliIn = static function (string $args, string $stdin) use ($cli): string {
    $p = proc_open("$cli $args 2>&1", [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
    fwrite($pipes[0], $stdin);
    fclose($pipes[0]);
    $out = (string) stream_get_contents($pipes[1]);
    fclose($pipes[1]);
    proc_close($p);
    return $out;
};
$json = json_decode($cliIn('--json --dsn=' . escapeshellarg($dsn) . ' show - --kind=session', "$sid\n"), true);
rl_same('redis-lease show - reads the key from stdin (a session id stays out of ps)', ['session', 1], [$json['kind'] ?? null, $json['waiters_total'] ?? null]);
// A lock name is binary: what the CLI prints of it runs no escape sequence.
$evil = rl_key("esc\e]0;owned\x07\u{9b}2J\xff");
$held = new DistributedLock($evil, 30.0, $dsn);
rl_ok('a lock named with control bytes is held', $held->acquire());
$top = (string) shell_exec("$cli --dsn=" . escapeshellarg($dsn) . ' top --count=1 --limit=100 2>&1');
$show = $cliIn('--dsn=' . escapeshellarg($dsn) . ' show -', "$evil\n");
rl_ok('redis-lease show - finds its holder', str_contains($show, 'holders (1)'), $show);
rl_ok('redis-lease top and show list it, its control bytes as \\xNN', str_contains($top, 'esc\\x1b]0;owned\\x07') && str_contains($show, 'esc\\x1b]0;owned\\x07'), $top . $show);
$json = (string) shell_exec("$cli --json --dsn=" . escapeshellarg($dsn) . ' top --count=1 --limit=100 2>&1');
rl_ok('... and print UTF-8 with no escape, bell or C1 character (--json too)', preg_match('//u', $top . $show . $json)
    && !preg_match('/[\x{0}-\x{9}\x{b}-\x{1f}\x{7f}-\x{9f}]/u', $top . $show . $json), bin2hex($top . $show . $json));
rl_ok('... --json writes them as \\u escapes', str_contains($json, 'esc\\u001b]0;owned\\u0007\\u009b2J'), $json);
$held->release();

// --- bad input ---
rl_throws('a bad kind', ValueError::class, fn() => RedisLease\inspect('x', 'queue', $dsn));
rl_throws('a bad lock name', ValueError::class, fn() => RedisLease\inspect('', 'lock', $dsn));
rl_throws('a bad session id', ValueError::class, fn() => RedisLease\inspect('../etc', 'session', $dsn));
rl_throws('a bad limit', ValueError::class, fn() => RedisLease\leases(null, $dsn, 0));
rl_throws('a bad timeout', ValueError::class, fn() => RedisLease\leases(null, $dsn, 10, -1.0));
$raw->cmd('HSET', 'lock:{wrongtype}', 'a', 'b');
$ex = rl_throws('a key of another type', RedisLease\ConnectionException::class, fn() => RedisLease\inspect('wrongtype', 'lock', $dsn));
rl_ok('... says so', $ex !== null && str_contains($ex->getMessage(), 'is not a redis_lease lock'), $ex?->getMessage() ?? '');
$raw->cmd('SET', 'lock:{foreign}', 'not a lease');
$ex = rl_throws('a string that is not a lease', RedisLease\ConnectionException::class, fn() => RedisLease\inspect('foreign', 'lock', $dsn));
$all = RedisLease\leases(null, $dsn);
rl_ok('leases() passes over keys that only look like leases', !array_intersect(['lock:{wrongtype}', 'lock:{foreign}'], array_column($all['leases'], 'key')));

// --- nothing written: the waiters gone, the server's write counter stays ---
foreach ([$w1, $w2, $w3, $w4, $w5] as $c) {
    $c->kill();
    $c->wait();
}
$raw->cmd('DEL', "lock:{{$k}}:waiters", "lock:{{$k}}:terms", "lock:{{$rk}}:waiters", "lock:{{$rk}}:terms", "lock:{{$sk}}:semaphore:waiters", "lock:{{$sk}}:semaphore:terms", "{PHPREDIS_SESSION:$sid}:lock:waiters", "{PHPREDIS_SESSION:$sid}:lock:terms");
$dirty = fn() => (int) preg_replace('/.*rdb_changes_since_last_save:(\d+).*/s', '$1', $raw->cmd('INFO', 'persistence'));
$before = $dirty();
RedisLease\inspect($k, 'lock', $dsn);
RedisLease\inspect($sid, 'session', $dsn);
RedisLease\inspect($sk, 'semaphore', $dsn);
RedisLease\leases(null, $dsn);
rl_same('inspect() and leases() write nothing', $before, $dirty());

// --- a user without SCAN; a prefix with half a million keys under it ---
$raw->cmd('ACL', 'SETUSER', 'noscan', 'on', '>n0scan-pw', '~*', '+@all', '-scan');
$ex = rl_throws('leases() as a user without SCAN', RedisLease\ConnectionException::class,
    fn() => RedisLease\leases(null, "redis://noscan:n0scan-pw@127.0.0.1:{$srv['port']}"));
rl_ok('... says SCAN failed, without the password', $ex !== null && str_contains($ex->getMessage(), 'SCAN failed') && !str_contains($ex->getMessage(), 'n0scan-pw'), $ex?->getMessage() ?? '');
rl_same('inspect() still works for that user', 'lock', RedisLease\inspect($k, 'lock', "redis://noscan:n0scan-pw@127.0.0.1:{$srv['port']}")['kind']);
// A user refused the scripts: every survey is refused. Before, a refusal was taken for a key that only
// looks like a lease: an empty answer that said it was complete, and top exited 0.
$raw->cmd('ACL', 'SETUSER', 'noscript', 'on', '>n0script-pw', '~*', '+@all', '-@scripting');
$nsd = "redis://noscript:n0script-pw@127.0.0.1:{$srv['port']}";
$p = RedisLease\leases(null, $nsd);
rl_ok('leases() as a user refused the scripts: partial, saying why', $p['partial'] && $p['leases'] === [] && str_contains(implode(' ', $p['why_partial']), 'NOPERM'), rl_fmt($p['why_partial']));
$out = (string) shell_exec("$cli --dsn=" . escapeshellarg($nsd) . ' top --count=1 2>&1; echo "exit $?"');
rl_ok('redis-lease top --count=1 whose view is partial exits 1', str_contains($out, 'PARTIAL') && str_contains($out, 'exit 1') && !str_contains($out, 'n0script-pw'), $out);
$few = RedisLease\leases(null, $dsn, 2);
rl_ok('leases() limited: found counts them all', count($few['leases']) === 2 && $few['found'] > 2, rl_fmt([count($few['leases']), $few['found']]));
$raw->cmd('DEBUG', 'POPULATE', 500000, 'lock:many');
$t0 = microtime(true);
$part = RedisLease\leases(null, $dsn, 10, 0.001);
$took = microtime(true) - $t0;
rl_ok('leases() with too little time: a partial answer that says why', $part['partial'] && str_contains(implode(' ', $part['why_partial']), 'ran out'), rl_fmt($part['why_partial']));
rl_ok('... within its time (and a round trip)', $took < 0.5, sprintf('%.3f s', $took));
$full = RedisLease\leases(null, $dsn, 10, 30.0);
rl_ok('leases() with time: every key scanned, and complete', !$full['partial'] && $full['scanned'] >= 500000, rl_fmt([$full['scanned'], $full['why_partial']]));
echo "done\n";
?>
--EXPECTF--
ok: the DSN carries the password
ok: an empty key: no holder, no waiter
ok: an empty key: the key shown
ok: held
ok: two waiters queued
ok: holder: one writer, its token cut to 8 characters, its fence
ok: holder: its lease left
ok: holder: held since its fence was assigned
ok: waiters in queue order: the writer, then the reader
ok: waiters: two in all
ok: waiters: the first has waited longer
ok: waiters: each will give up within its wait
ok: waiters: the ttl each asks for
ok: the last fence
ok: inspect(): no whole token, session id or password in it
ok: two readers
ok: a writer queued behind the readers
ok: two read holders, first to expire first
ok: read holders: their leases left
ok: one writer waiting
ok: a short read hold beside a long one
ok: the short lease ran out
ok: an expired holder is not a holder, and is counted
ok: the long one released
ok: 2 permits at once
ok: a waiter for 2 permits queued
ok: the semaphore: one hold of 2 permits
ok: the semaphore: 2 permits held, its limit as the waiter has it
ok: the semaphore: the waiter wants 2 of 3
ok: a request waits for the session
ok: the session: its key with the id cut to 6 characters
ok: the session: one holder, one waiter
ok: the session: its data size
ok: inspect() of a session: no whole token, session id or password in it
ok: a session under the DSN's prefix=: held, as its store keeps it
ok: ... listed by leases() with that DSN
ok: ... found counts what it lists
ok: leases(): complete
ok: leases(): the key with two waiters first
ok: leases(): finds lock:{%s}
ok: leases(): finds lock:{%s}:semaphore
ok: leases(): finds {PHPREDIS_SESSION:%s…}:lock
ok: leases(): not the empty key, nor the expired hold
ok: leases(): sorted by waiters
ok: leases(): no whole token, session id or password in it
ok: leases() under a prefix, limited
ok: redis-lease top: the contended key on the first row
ok: redis-lease top: its two waiters
ok: redis-lease top: no whole token, session id or password in it
ok: redis-lease show: holders and waiters
ok: redis-lease show: no whole token, session id or password in it
ok: redis-lease show --json: the session
ok: redis-lease: a failure is said, without the password
ok: redis-lease: a bad option is a usage error
ok: redis-lease: a mistyped option is not echoed
ok: redis-lease: a mistyped command is named
ok: redis-lease show - reads the key from stdin (a session id stays out of ps)
ok: a lock named with control bytes is held
ok: redis-lease show - finds its holder
ok: redis-lease top and show list it, its control bytes as \xNN
ok: ... and print UTF-8 with no escape, bell or C1 character (--json too)
ok: ... --json writes them as \u escapes
ok: a bad kind
ok: a bad lock name
ok: a bad session id
ok: a bad limit
ok: a bad timeout
ok: a key of another type
ok: ... says so
ok: a string that is not a lease
ok: leases() passes over keys that only look like leases
ok: inspect() and leases() write nothing
ok: leases() as a user without SCAN
ok: ... says SCAN failed, without the password
ok: inspect() still works for that user
ok: leases() as a user refused the scripts: partial, saying why
ok: redis-lease top --count=1 whose view is partial exits 1
ok: leases() limited: found counts them all
ok: leases() with too little time: a partial answer that says why
ok: ... within its time (and a round trip)
ok: leases() with time: every key scanned, and complete
done
