--TEST--
DistributedSemaphore with weights: acquire($wait, $permits) takes several permits at once as one hold (one token, released and renewed as one), admitted only while they all fit under the limit; first come, first served (a request for many at the head of the queue is not overtaken by a smaller one behind it); a crashed weighted holder's permits free at its ttl; restore() and release() of a weighted hold free all of it; bad weights are a ValueError
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

$k = rl_key('wsem');
$base = rl_lock_key($k) . ':semaphore';
$sem = static fn(float $ttl = 30.0) => new DistributedSemaphore($k, 5, $ttl, $dsn);

$a = $sem();
rl_same('A takes 3 of 5 permits at once', true, $a->acquire(0.0, 3));
rl_same('one hold in Redis, weighing 3', [1, '3'], [$raw->cmd('ZCARD', "$base:holders"), $raw->cmd('HGET', "$base:weights", $a->getToken())]);
$b = $sem();
rl_same('B cannot have 3 more (2 are free)', false, $b->acquire(0.0, 3));
rl_same('B can have 2', true, $b->acquire(0.0, 2));
$c = $sem();
rl_same('C cannot have even 1 (5 of 5 held)', false, $c->acquire(0.0));
rl_same('A refreshes its 3 as one', true, $a->refresh(10.0));
rl_ok('the weights last as long as the holds', $raw->cmd('PTTL', "$base:weights") >= $raw->cmd('PTTL', "$base:holders") - 5,
    $raw->cmd('PTTL', "$base:weights") . ' vs ' . $raw->cmd('PTTL', "$base:holders"));
rl_same('A releases its 3 as one', true, $a->release());
rl_same('C can now have 3', true, $c->acquire(0.0, 3));
rl_same('B and C release', [true, true], [$b->release(), $c->release()]);
rl_same('nothing left (holders, weights)', 0, $raw->cmd('EXISTS', "$base:holders", "$base:weights"));

// Bad weights.
$d = $sem();
foreach ([0, -1, 6] as $bad) {
    rl_throws("acquire(0, $bad) on a semaphore of 5 is a ValueError", ValueError::class, fn() => $d->acquire(0.0, $bad));
}
$e = rl_throws('synchronized(..., 6) too', ValueError::class, fn() => $d->synchronized(fn() => 1, 0.0, 6));
rl_ok('... naming its argument #3', $e !== null && str_contains($e->getMessage(), 'synchronized(): Argument #3 ($permits)'), $e?->getMessage() ?? '');
$e = rl_throws('acquire(0, 6): naming its argument #2', ValueError::class, fn() => $d->acquire(0.0, 6));
rl_ok('... so', $e !== null && str_contains($e->getMessage(), 'acquire(): Argument #2 ($permits)'), $e?->getMessage() ?? '');
rl_same('acquire(0, 2)', true, $d->acquire(0.0, 2));
$e = rl_throws('acquire(0, 3) while holding 2 is a ValueError (release them first)', ValueError::class, fn() => $d->acquire(0.0, 3));
rl_ok('... saying how many it holds', $e !== null && str_contains($e->getMessage(), 'holds 2 permits'), $e?->getMessage() ?? '');
rl_same('acquire(0, 2) while holding 2 renews them', true, $d->acquire(0.0, 2));
rl_same('synchronized(..., 2) nests in it', 'in', $d->synchronized(fn() => 'in', 0.0, 2));

// restore() of a weighted hold: its release frees all of its permits.
$token = $d->detach();
$r = DistributedSemaphore::restore($k, 5, $token, 30.0, $dsn);
rl_same('the restored weighted hold is held', true, $r->isAcquired());
rl_same('... and released as one', true, $r->release());
rl_same('all 5 are free again', true, ($f = $sem())->acquire(0.0, 5));
$f->release();

// A restored weighted hold's object learns its weight from Redis: acquire()
// with another weight is refused, and with its own renews it (before, the
// object took any weight at its word: acquire(0, 5) renewed a hold of 3 and
// said it held 5).
$g = $sem();
rl_same('G takes 3', true, $g->acquire(0.0, 3));
$r = DistributedSemaphore::restore($k, 5, $g->detach(), 30.0, $dsn);
$e = rl_throws('acquire(0, 5) on the restored hold of 3 is a ValueError', ValueError::class, fn() => $r->acquire(0.0, 5));
rl_ok('... saying it holds 3', $e !== null && str_contains($e->getMessage(), 'holds 3 permits'), $e?->getMessage() ?? '');
$e = rl_throws('synchronized(..., 1) in it too', ValueError::class, fn() => $r->synchronized(fn() => 1, 0.0, 1));
rl_same('acquire(0, 3) renews it', true, $r->acquire(0.0, 3));
rl_same('... still one hold of 3', [1, '3'], [$raw->cmd('ZCARD', "$base:holders"), $raw->cmd('HGET', "$base:weights", $r->getToken())]);
rl_same('so 2 are free, not 3', [false, true], [($h = $sem())->acquire(0.0, 3), $h->acquire(0.0, 2)]);
$h->release();
// A restored hold that lapsed: acquire() takes what it asks for, afresh.
$g = new DistributedSemaphore($k, 5, 0.2, $dsn);
rl_same('G takes 1 for 0.2 s', true, $g->acquire(0.0, 1));
$lapsed = $g->detach();
$serverMs = static function () use ($raw): int {
    [$s, $us] = $raw->cmd('TIME');
    return (int) $s * 1000 + intdiv((int) $us, 1000);
};
rl_ok('... and its lease runs out', rl_wait_until(fn() => (int) $raw->cmd('ZSCORE', "$base:holders", $lapsed) < $serverMs(), 5.0));
$r->release();
$r = DistributedSemaphore::restore($k, 5, $lapsed, 30.0, $dsn);
rl_same('acquire(0, 4) on the lapsed restored hold takes 4 afresh', true, $r->acquire(0.0, 4));
rl_same('... weighing 4', '4', $raw->cmd('HGET', "$base:weights", $r->getToken()));
rl_same('so 1 is free, not 2', [false, true], [($h = $sem())->acquire(0.0, 2), $h->acquire(0.0, 1)]);
$h->release();
$r->release();

// FIFO with weights: A holds 3; B (a child) waits for 4; C (a child) then asks for 1.
// One permit is free at once, but C must not overtake B.
$a = $sem();
rl_same('A takes 3', true, $a->acquire(0.0, 3));
$child = static function (int $permits) use ($k, $dsn): RlChild {
    return rl_spawn_php('
$s = new DistributedSemaphore(' . var_export($k, true) . ', 5, 30.0, ' . var_export($dsn, true) . ');
$t = microtime(true);
$got = $s->acquire(10.0, ' . $permits . ');
echo json_encode(["got" => $got, "at" => microtime(true)]), "\n";
fgets(STDIN);
$s->release();
');
};
$b = $child(4);
rl_ok('B queues for 4', rl_wait_until(fn() => $raw->cmd('ZCARD', "$base:waiters") === 1, 5.0));
$c = $child(1);
rl_ok('C queues for 1 behind B, although 2 are free', rl_wait_until(fn() => $raw->cmd('ZCARD', "$base:waiters") === 2, 5.0));
rl_same('C has not got in', [3, 1], [(int) $raw->cmd('HGET', "$base:weights", $a->getToken()), $raw->cmd('ZCARD', "$base:holders")]);
rl_same('A releases', true, $a->release());
$jb = json_decode((string) $b->readLine(5.0), true);
$jc = json_decode((string) $c->readLine(5.0), true);
rl_same('A\'s release let B in with its 4, and C behind it with its 1', [true, true], [$jb['got'] ?? null, $jc['got'] ?? null]);
rl_same('5 permits held (4 + 1)', 5, $raw->cmd('ZCARD', "$base:holders") + (int) $raw->cmd('HGET', "$base:weights", ''));
$b->send('');
$c->send('');
rl_ok('both released', rl_wait_until(fn() => $raw->cmd('EXISTS', "$base:holders") === 0, 5.0));

// A crashed weighted holder: its permits free at its ttl, weights and all.
$g = $sem(0.3);
rl_same('a holder of 4 with a 0.3 s lease', true, $g->acquire(0.0, 4));
$gt = $g->detach(); // gone without a release, as a crashed worker
$h = $sem();
rl_same('2 more do not fit meanwhile', false, $h->acquire(0.0, 2));
rl_same('they fit once its lease ran out', true, $h->acquire(2.0, 2));
rl_same('the crashed hold\'s weight is gone with it', null, $raw->cmd('HGET', "$base:weights", $gt));
rl_same('released', true, $h->release());
rl_same('nothing left', 0, $raw->cmd('EXISTS', "$base:holders", "$base:weights", "$base:waiters"));
echo "done\n";
?>
--EXPECT--
ok: A takes 3 of 5 permits at once
ok: one hold in Redis, weighing 3
ok: B cannot have 3 more (2 are free)
ok: B can have 2
ok: C cannot have even 1 (5 of 5 held)
ok: A refreshes its 3 as one
ok: the weights last as long as the holds
ok: A releases its 3 as one
ok: C can now have 3
ok: B and C release
ok: nothing left (holders, weights)
ok: acquire(0, 0) on a semaphore of 5 is a ValueError
ok: acquire(0, -1) on a semaphore of 5 is a ValueError
ok: acquire(0, 6) on a semaphore of 5 is a ValueError
ok: synchronized(..., 6) too
ok: ... naming its argument #3
ok: acquire(0, 6): naming its argument #2
ok: ... so
ok: acquire(0, 2)
ok: acquire(0, 3) while holding 2 is a ValueError (release them first)
ok: ... saying how many it holds
ok: acquire(0, 2) while holding 2 renews them
ok: synchronized(..., 2) nests in it
ok: the restored weighted hold is held
ok: ... and released as one
ok: all 5 are free again
ok: G takes 3
ok: acquire(0, 5) on the restored hold of 3 is a ValueError
ok: ... saying it holds 3
ok: synchronized(..., 1) in it too
ok: acquire(0, 3) renews it
ok: ... still one hold of 3
ok: so 2 are free, not 3
ok: G takes 1 for 0.2 s
ok: ... and its lease runs out
ok: acquire(0, 4) on the lapsed restored hold takes 4 afresh
ok: ... weighing 4
ok: so 1 is free, not 2
ok: A takes 3
ok: B queues for 4
ok: C queues for 1 behind B, although 2 are free
ok: C has not got in
ok: A releases
ok: A's release let B in with its 4, and C behind it with its 1
ok: 5 permits held (4 + 1)
ok: both released
ok: a holder of 4 with a 0.3 s lease
ok: 2 more do not fit meanwhile
ok: they fit once its lease ran out
ok: the crashed hold's weight is gone with it
ok: released
ok: nothing left
done
