--TEST--
Randomized sequences of every public method of DistributedLock and DistributedSemaphore on objects whose holds are plain, restored (from a detached token), detached, forked (a child using its copies), lapsed (a lease run out) or converted (upgraded, downgraded), each call followed by any other, against a real Redis: after every call, Redis never has a writer beside a reader nor more permits than the limit, nobody queues (no call is waiting), every hold in Redis belongs to a live object or a detached token, a fencing token is the one in Redis, writers' fences rise; a synchronized() callback runs with its hold alone in Redis, a synchronizedRead() one with no other writer; only the documented exceptions are thrown
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

const SEQUENCES = 200;
const STEPS = 30;
const TTL = [0.15, 0.4, 2.0];   // lease lengths drawn per object

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$seed0 = (int) (getenv('RL_SEQ_SEED') ?: random_int(1, 1 << 30));

/** One sequence's world: the objects, the detached tokens, what was seen. */
final class World
{
    /** @var array<int, DistributedLock|DistributedSemaphore> */
    public array $objects = [];
    /** @var array<int, array{kind: string, ttl: float}> */
    public array $meta = [];
    /** @var array<string, string> detached token => 'lock'|'sem' */
    public array $detached = [];
    public int $lastFence = 0;
    /** @var array<int, string> the last token each live object had (a hold the watchdog gave up on is still its to release) */
    public array $last = [];
    public array $log = [];
    public int $next = 0;

    public function __construct(public string $key, public string $semKey, public string $dsn, public RlRaw $raw)
    {
    }

    public function lk(): string
    {
        return rl_lock_key($this->key);
    }

    public function sk(): string
    {
        return rl_lock_key($this->semKey) . ':semaphore';
    }

    public function add(string $kind, float $ttl, ?string $token = null, bool $auto = false): int
    {
        $o = match ([$kind, $token === null]) {
            ['lock', true] => new DistributedLock($this->key, $ttl, $this->dsn, $auto),
            ['lock', false] => DistributedLock::restore($this->key, $token, $ttl, $this->dsn, $auto),
            ['sem', true] => new DistributedSemaphore($this->semKey, 2, $ttl, $this->dsn, $auto),
            ['sem', false] => DistributedSemaphore::restore($this->semKey, 2, $token, $ttl, $this->dsn, $auto),
        };
        $id = $this->next++;
        $this->objects[$id] = $o;
        $this->meta[$id] = ['kind' => $kind, 'ttl' => $ttl];
        return $id;
    }

    /** Records object $id's token, if it has one, as its to release (see $last). */
    public function see(int $id): void
    {
        if (($t = $this->objects[$id]->getToken()) !== null) {
            $this->last[$id] = $t;
        }
    }

    /** Live shared holds (token => ms left) of a holders key, per Redis's clock. */
    public function live(string $holders): array
    {
        $t = $this->raw->cmd('TIME');
        $now = (int) $t[0] * 1000 + intdiv((int) $t[1], 1000);
        $flat = $this->raw->cmd('ZRANGE', $holders, 0, -1, 'WITHSCORES') ?: [];
        $out = [];
        for ($i = 0; $i + 1 < count($flat); $i += 2) {
            if ((int) $flat[$i + 1] > $now) {
                $out[$flat[$i]] = (int) $flat[$i + 1] - $now;
            }
        }
        return $out;
    }

    /** The lock's value as [token, fence|null], or null. */
    public function lockValue(): ?array
    {
        $v = $this->raw->cmd('GET', $this->lk());
        if (!is_string($v)) {
            return null;
        }
        [$t, $f] = explode(':', $v, 2) + [1 => ''];
        return [$t, $f === '' ? null : (int) $f];
    }
}

/** A violation: the seed and the calls that led to it. */
function bad(World $w, int $seed, string $what): void
{
    $objects = [];
    foreach ($w->objects as $id => $o) {
        $objects[] = "#$id " . substr((string) $o->getToken(), 0, 8) . ' (last ' . substr($w->last[$id] ?? '', 0, 8) . ')';
    }
    throw new RuntimeException("seed $seed: $what\n  calls: " . implode("\n         ", array_slice($w->log, -12))
        . "\n  objects: " . implode(', ', $objects) . "\n  lock: " . json_encode($w->lockValue())
        . ' readers: ' . json_encode(array_map(fn($t) => substr($t, 0, 8), array_keys($w->live($w->lk() . ':holders')))));
}

/** The invariants between calls (see --TEST--). */
function check(World $w, int $seed): void
{
    $lock = $w->lockValue();
    $readers = $w->live($w->lk() . ':holders');
    $permits = $w->live($w->sk() . ':holders');
    if ($lock !== null && $readers !== []) {
        bad($w, $seed, 'a writer (' . substr($lock[0], 0, 8) . ') beside readers ' . json_encode(array_map(fn($t) => substr($t, 0, 8), array_keys($readers))));
    }
    if (count($permits) > 2) {
        bad($w, $seed, count($permits) . ' permits held, limit 2');
    }
    foreach ([$w->lk(), $w->sk()] as $base) {
        if ($w->raw->cmd('ZCARD', "$base:waiters") !== 0) {
            bad($w, $seed, 'a queue entry with nobody waiting: ' . json_encode($w->raw->cmd('ZRANGE', "$base:waiters", 0, -1)));
        }
    }
    $known = $w->detached;
    foreach ($w->objects as $id => $o) {
        $w->see($id);
        if (isset($w->last[$id])) {
            $known[$w->last[$id]] = true;
        }
    }
    foreach ([...($lock === null ? [] : [$lock[0]]), ...array_keys($readers), ...array_keys($permits)] as $t) {
        if (!isset($known[$t])) {
            bad($w, $seed, 'a hold in Redis that no object knows of and nobody detached: ' . substr($t, 0, 8));
        }
    }
}

/** Runs a callback nested in synchronized*() (or inside it): checks the hold, then maybe calls more. */
function inside(World $w, int $seed, int $id, bool $alone, callable $more): string
{
    $o = $w->objects[$id];
    $t = $o->getToken();
    if ($o instanceof DistributedSemaphore) {
        if (!isset($w->live($w->sk() . ':holders')[(string) $t])) {
            bad($w, $seed, "synchronized() callback of #$id runs without its permit");
        }
    } else {
        $lock = $w->lockValue();
        if ($alone && ($lock === null || $lock[0] !== $t || $w->live($w->lk() . ':holders') !== [])) {
            bad($w, $seed, "synchronized() callback of #$id runs without the lock alone (lock " . json_encode($lock) . ')');
        }
        if (!$alone && $lock !== null && $lock[0] !== $t) {
            bad($w, $seed, "synchronizedRead() callback of #$id runs beside a writer");
        }
    }
    $more();
    return 'ran';
}

$stats = ['calls' => 0, 'exceptions' => [], 'restored' => 0, 'forked' => 0, 'lapsed' => 0, 'upgrades' => 0,
    'downgrades' => 0, 'synchronized' => 0];
$expected = [RedisLease\LockLostException::class, RedisLease\LockTimeoutException::class, RedisLease\LeaseException::class];

for ($seq = 0; $seq < SEQUENCES; $seq++) {
    $seed = $seed0 + $seq;
    mt_srand($seed);
    $w = new World(rl_key("seq$seq"), rl_key("sem$seq"), $dsn, $raw);
    for ($i = 0; $i < 3; $i++) {
        $w->add('lock', TTL[mt_rand(0, 2)], null, mt_rand(0, 3) === 0);
    }
    $w->add('sem', TTL[mt_rand(0, 2)], null, mt_rand(0, 3) === 0);
    $w->add('sem', TTL[mt_rand(0, 2)]);
    for ($step = 0; $step < STEPS; $step++) {
        if ($w->objects === []) {
            $w->add(mt_rand(0, 1) ? 'lock' : 'sem', TTL[mt_rand(0, 2)]);
        }
        $ids = array_keys($w->objects);
        $id = $ids[mt_rand(0, count($ids) - 1)];
        $o = $w->objects[$id];
        $isLock = $o instanceof DistributedLock;
        $ops = ['acquire', 'acquire', 'release', 'release', 'refresh', 'isAcquired', 'getRemainingLifetime', 'getToken',
            'detach', 'restore', 'synchronized', 'unset', 'lapse', 'fork', 'new'];
        if ($isLock) {
            array_push($ops, 'acquireRead', 'acquireRead', 'getFencingToken', 'synchronizedRead', 'forceRelease', 'isLocked',
                'convert', 'convert');
        }
        $op = $ops[mt_rand(0, count($ops) - 1)];
        $wait = [0.0, 0.0, 0.05][mt_rand(0, 2)];
        $before = $o->getToken();
        $detachedHere = null;
        $w->log[] = "#$id " . ($isLock ? 'lock' : 'sem') . " $op" . ($before === null ? '' : ' [' . substr($before, 0, 8) . ']');
        $logged = count($w->log) - 1;
        $stats['calls']++;
        try {
            switch ($op) {
                case 'convert':
                    // The other kind of hold on the same token: an upgrade of a read
                    // hold, a downgrade of a write hold (a plain read when none).
                    $op = $before !== null && $o->getFencingToken() === null ? 'acquire' : 'acquireRead';
                    $w->log[$logged] .= " ($op)";
                    // no break
                case 'acquire':
                case 'acquireRead':
                    if ($op === 'acquireRead') {
                        $wasWriting = $before !== null && $o->getFencingToken() !== null;
                        $got = $o->acquireRead($wait);
                        // Known at once: a short auto-renewed lease its watchdog gives up on (a stalled
                        // machine) hides from getToken() by the time check() asks, yet is still its to release.
                        $w->see($id);
                        $stats['downgrades'] += $wasWriting && $got ? 1 : 0;
                        if ($got && $o->getFencingToken() !== null) {
                            bad($w, $seed, "#$id acquireRead() true, but it still has a fencing token");
                        }
                        break;
                    }
                    $fenceBefore = $isLock ? $o->getFencingToken() : null;
                    $wasReading = $isLock && $before !== null && $fenceBefore === null;
                    $got = $o->acquire($wait);
                    $w->see($id);
                    $stats['upgrades'] += $wasReading && $got ? 1 : 0;
                    if ($got && $isLock) {
                        $f = $o->getFencingToken();
                        $v = $w->lockValue();
                        if ($f === null || $v === null || $v[0] !== $o->getToken() || $v[1] !== $f) {
                            bad($w, $seed, "#$id acquire() true, but its fence " . json_encode($f) . ' is not the lock in Redis ' . json_encode($v));
                        }
                        if ($f < $w->lastFence) {
                            bad($w, $seed, "#$id writers' fences fell: $f after {$w->lastFence}");
                        }
                        $w->lastFence = max($w->lastFence, $f);
                    }
                    break;
                case 'release':
                    $o->release();
                    break;
                case 'refresh':
                    $o->refresh(mt_rand(0, 1) ? null : 1.0);
                    break;
                case 'isAcquired':
                    $a = $o->isAcquired();
                    if ($a && $o->getToken() === null) {
                        bad($w, $seed, "#$id isAcquired() true without a token");
                    }
                    break;
                case 'getRemainingLifetime':
                    $o->getRemainingLifetime();
                    break;
                case 'getToken':
                    $o->getToken();
                    break;
                case 'getFencingToken':
                    // The fence of our hold (kept, not asked again): the lock's in
                    // Redis while our token holds it; a lower one than any later
                    // holder's once it was lost (a forked child may release it).
                    $f = $o->getFencingToken();
                    $v = $w->lockValue();
                    if ($f !== null && $v !== null && (($v[0] === $o->getToken() && $v[1] !== $f)
                            || ($v[0] !== $o->getToken() && $v[1] !== null && $v[1] <= $f))) {
                        bad($w, $seed, "#$id getFencingToken() $f, but the lock in Redis is " . json_encode($v));
                    }
                    break;
                case 'detach':
                    if (($t = $o->detach()) !== null) {
                        $w->detached[$t] = $isLock ? 'lock' : 'sem';
                    }
                    unset($w->last[$id]);
                    break;
                case 'restore':
                    if ($w->detached !== []) {
                        $tokens = array_keys($w->detached);
                        $t = $tokens[mt_rand(0, count($tokens) - 1)];
                        $kind = $w->detached[$t];
                        // (Detached until restored: an auto-renewed restore that throws leaves it so.)
                        $nid = $w->add($kind, TTL[mt_rand(0, 2)], $t, mt_rand(0, 3) === 0);
                        unset($w->detached[$t]);
                        // Its to release from now on, even if it cannot count on the hold (an
                        // auto-renewed restore asks Redis at once: a hold with ms left is given
                        // up by its watchdog, hidden from getToken(), and still released).
                        $w->last[$nid] = $t;
                        $w->log[] = "  -> #$nid restored";
                        $stats['restored']++;
                    }
                    break;
                case 'synchronized':
                case 'synchronizedRead':
                    $alone = $op === 'synchronized' && $isLock;
                    $nested = ['detach', 'acquire', 'release', 'isAcquired', 'refresh', 'none'][mt_rand(0, 5)];
                    $w->log[] = "  (callback: $nested)";
                    $detachedHere = null;
                    $o->$op(static function () use ($w, $seed, $id, $alone, $nested, $o, &$detachedHere) {
                        return inside($w, $seed, $id, $alone, static function () use ($w, $nested, $o, $id) {
                            if ($nested === 'detach') {
                                if (($t = $o->detach()) !== null) {
                                    $w->detached[$t] = $o instanceof DistributedLock ? 'lock' : 'sem';
                                    $detachedHere = $t;
                                }
                                unset($w->last[$id]);
                            } elseif ($nested !== 'none') {
                                $o->$nested();
                            }
                        });
                    }, $wait);
                    $stats['synchronized']++;
                    break;
                case 'unset':
                    unset($w->objects[$id], $w->last[$id], $o);
                    break;
                case 'new':
                    $w->add($isLock ? 'lock' : 'sem', TTL[mt_rand(0, 2)], null, mt_rand(0, 3) === 0);
                    break;
                case 'forceRelease':
                    DistributedLock::forceRelease($w->key, $dsn);
                    break;
                case 'isLocked':
                    DistributedLock::isLocked($w->key, $dsn);
                    break;
                case 'lapse':
                    // Let this object's lease run out (a pause): shorten it, then wait
                    // (bounded) for Redis to drop it.
                    if ($before !== null && $o->refresh(0.02)) {
                        $lk = $isLock ? $w->lk() : $w->sk();
                        rl_wait_until(static fn() => ($w->lockValue()[0] ?? null) !== $before
                            && !isset($w->live("$lk:holders")[$before]), 1.0, 0.005);
                        $stats['lapsed']++;
                    }
                    break;
                case 'fork':
                    // A child uses its copies of the objects (no detach: a token it
                    // detached would live on unknown to us), then exits: destructors run.
                    // What the child took itself must be gone once it drops its copies
                    // (while it still lives: no request end to clean up after it).
                    $pid = pcntl_fork();
                    if ($pid === 0) {
                        $own = [];
                        try {
                            mt_srand($seed * 7 + $step);
                            foreach ($w->objects as $co) {
                                $m = ['acquire', 'release', 'isAcquired', 'refresh', 'none'][mt_rand(0, 4)];
                                $had = $co->getToken();
                                if ($m !== 'none') {
                                    $co->$m();
                                }
                                if ($co->getToken() !== null && $co->getToken() !== $had) {
                                    $own[] = $co->getToken();
                                }
                            }
                        } catch (Throwable) {
                        }
                        unset($co, $o, $e);
                        $w->objects = [];
                        $left = array_filter($own, static fn($t) => ($w->lockValue()[0] ?? null) === $t
                            || isset($w->live($w->lk() . ':holders')[$t]) || isset($w->live($w->sk() . ':holders')[$t]));
                        exit($left === [] ? 0 : 3);
                    }
                    pcntl_waitpid($pid, $status);
                    if (pcntl_wexitstatus($status) === 3) {
                        bad($w, $seed, 'a forked child dropped its objects, and a hold it took itself is still in Redis');
                    }
                    $stats['forked']++;
                    break;
            }
        } catch (Throwable $e) {
            $class = get_class($e);
            if (!in_array($class, $expected, true)) {
                bad($w, $seed, "#$id $op threw $class: " . $e->getMessage());
            }
            // A hold detached inside its synchronized*() is not lost while Redis keeps it.
            if ($e instanceof RedisLease\LockLostException && ($detachedHere ?? null) !== null
                && (($w->lockValue()[0] ?? null) === $detachedHere || isset($w->live($w->lk() . ':holders')[$detachedHere])
                    || isset($w->live($w->sk() . ':holders')[$detachedHere]))) {
                bad($w, $seed, "#$id $op: LockLostException, but the hold its callback detached is alive in Redis");
            }
            $stats['exceptions'][$class] = ($stats['exceptions'][$class] ?? 0) + 1;
            $w->log[$logged] .= " -> $class";
            // Its trace keeps the arguments of the calls it went through (a closure
            // that captured an object): the object must be free to go when unset.
            unset($e);
        }
        check($w, $seed);
    }
    // The end of the sequence: every object goes (the loop's own reference too, and
    // an exception's, whose trace keeps the closures that captured it); what it
    // held is released.
    unset($o, $e);
    $w->objects = $w->last = [];
    foreach (array_keys($w->detached) as $t) {
        ($w->detached[$t] === 'lock' ? DistributedLock::restore($w->key, $t, 1.0, $dsn)
            : DistributedSemaphore::restore($w->semKey, 2, $t, 1.0, $dsn))->release();
    }
    $w->detached = [];
    check($w, $seed);
    if ($w->lockValue() !== null || $w->live($w->lk() . ':holders') !== [] || $w->live($w->sk() . ':holders') !== []) {
        bad($w, $seed, 'holds left once every object and token was let go');
    }
}
rl_ok('every sequence kept the invariants', true);
rl_ok('restored holds were exercised', $stats['restored'] >= 30, (string) $stats['restored']);
rl_ok('forked children ran', $stats['forked'] >= 50, (string) $stats['forked']);
rl_ok('leases lapsed', $stats['lapsed'] >= 20, (string) $stats['lapsed']);
rl_ok('upgrades and downgrades happened', $stats['upgrades'] >= 20 && $stats['downgrades'] >= 20,
    "{$stats['upgrades']} upgrades, {$stats['downgrades']} downgrades");
rl_ok('synchronized*() callbacks ran', $stats['synchronized'] >= 200, (string) $stats['synchronized']);
printf("info: %d sequences from seed %d: %d calls, %d restores, %d forks, %d lapses, %d upgrades, %d downgrades, %d synchronized; exceptions %s\n",
    SEQUENCES, $seed0, $stats['calls'], $stats['restored'], $stats['forked'], $stats['lapsed'], $stats['upgrades'],
    $stats['downgrades'], $stats['synchronized'], json_encode($stats['exceptions']));
echo "done\n";
?>
--EXPECTF--
ok: every sequence kept the invariants
ok: restored holds were exercised
ok: forked children ran
ok: leases lapsed
ok: upgrades and downgrades happened
ok: synchronized*() callbacks ran
info: %s
done
