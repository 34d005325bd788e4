--TEST--
DistributedLock: 8 processes x 200 read-modify-write increments under synchronized() lose no update; fencing tokens strictly increase
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('counter');
const WORKERS = 8;
const ROUNDS = 200;

// Each worker waits for "go" so that all of them contend from the start.
// Inside the critical section: GET, a short pause (widens the race window:
// without mutual exclusion updates would be lost), SET, and RPUSH of the
// fencing token of the current hold.
$code = '
$raw = new RlRaw(' . $srv['port'] . ');
$l = new DistributedLock(' . rl_export($k) . ', 10.0, ' . rl_export($dsn) . ');
echo "ready\n";
if (trim((string) fgets(STDIN)) !== "go") { exit(1); }
for ($i = 0; $i < ' . ROUNDS . '; $i++) {
    $l->synchronized(function () use ($raw, $l) {
        $v = (int) $raw->cmd("GET", "counter");
        usleep(200);
        $raw->cmd("SET", "counter", $v + 1);
        $raw->cmd("RPUSH", "tokens", (string) $l->getFencingToken());
    }, 20.0);
}
echo "done\n";
echo json_encode(RedisLease\metrics()), "\n";
';

$children = [];
for ($i = 0; $i < WORKERS; $i++) {
    $children[] = rl_spawn_php($code);
}
$ready = 0;
foreach ($children as $c) {
    if ($c->readLine(15.0) === 'ready') {
        $ready++;
    }
}
rl_same('all workers ready', WORKERS, $ready);
$t0 = microtime(true);
foreach ($children as $c) {
    $c->send('go');
}

$done = 0;
$acquiredPerWorker = [];
$contended = 0;
$problems = [];
foreach ($children as $i => $c) {
    // Bounded overall: ~30 s for the whole run.
    $left = max(0.1, 30.0 - (microtime(true) - $t0));
    $line = $c->readLine($left);
    if ($line === 'done') {
        $done++;
        $m = json_decode((string) $c->readLine(5.0), true);
        $acquiredPerWorker[] = $m['lock_acquired'] ?? null;
        $contended += $m['lock_contended'] ?? 0;
    } else {
        $problems[] = "worker $i: " . rl_fmt($line) . ' ' . $c->readAll(1.0);
    }
}
$elapsed = microtime(true) - $t0;
foreach ($children as $c) {
    $c->wait(5.0);
}
rl_ok('all workers finished', $done === WORKERS, implode("\n", $problems));
rl_ok('finished within 30 s', $elapsed < 30.0, sprintf('%.1f s', $elapsed));

rl_same('counter == 1600', (string) (WORKERS * ROUNDS), $raw->cmd('GET', 'counter'));
$tokens = $raw->cmd('LRANGE', 'tokens', 0, -1);
rl_same('1600 tokens recorded', WORKERS * ROUNDS, count($tokens));
$bad = [];
for ($i = 1; $i < count($tokens); $i++) {
    if (!((int) $tokens[$i] > (int) $tokens[$i - 1])) {
        $bad[] = "#$i: {$tokens[$i - 1]} then {$tokens[$i]}";
    }
}
rl_ok('tokens strictly increasing in critical-section order', $bad === [],
    count($bad) . ' violations, first: ' . implode('; ', array_slice($bad, 0, 5)));
rl_ok('all tokens are integers', count(array_filter($tokens, fn($t) => !preg_match('/^\d+$/', $t))) === 0);
rl_same('metrics: each worker counted 200 lock_acquired', array_fill(0, WORKERS, ROUNDS), $acquiredPerWorker);
// Otherwise the workers never overlapped and the test proved nothing.
rl_ok('the workers really contended (lock_contended summed over workers > 100)', $contended > 100, "lock_contended total: $contended");
rl_same('no lock left behind', 0, $raw->cmd('EXISTS', rl_lock_key($k)));
echo "done\n";
?>
--EXPECT--
ok: all workers ready
ok: all workers finished
ok: finished within 30 s
ok: counter == 1600
ok: 1600 tokens recorded
ok: tokens strictly increasing in critical-section order
ok: all tokens are integers
ok: metrics: each worker counted 200 lock_acquired
ok: the workers really contended (lock_contended summed over workers > 100)
ok: no lock left behind
done
