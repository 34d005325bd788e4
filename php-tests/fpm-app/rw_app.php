<?php
/*
 * Requests of the read/write-lock and semaphore tests (rw_*.phpt, semaphore_*.phpt,
 * fault_rw_*.phpt). The DSN is $_SERVER['RL_DSN']; the shared resource
 * (rw_common.inc) and control keys live in the Redis at RL_CTL_PORT.
 *
 *   op=hammer&key=K&res=R&counter=C&rounds=N&seed=S[&nolock=1]
 *       N sections on read/write lock K, each of a kind drawn from seed S:
 *       read (acquireRead or synchronizedRead: the counter C must not change
 *       while we read), write (acquire or synchronized: C read, modified,
 *       written), down (a write, then acquireRead(): a downgrade; C must still
 *       be our own write), up (a read of C, then acquire(): an upgrade; C must
 *       still be what we read, then a write), moved (a read hold detached and
 *       restored into another object, whose synchronized() must refuse), lapse
 *       (a read whose lease runs out while it waits to upgrade). nolock=1 takes
 *       no lock at all (the control run: the checks must catch it).
 *   op=reader_stream&key=K&res=R&hold_ms=H&seconds=S
 *       read sections of H/3..H ms (at random) on K, back to back, for S seconds.
 *   op=writer_probes&key=K&res=R&probes=P&gap_ms=G&hold_ms=H&readers_before=B
 *       P times: G ms pause, wait until B readers are inside, then acquire() on K
 *       timed, H ms inside, release.
 *   op=sem&key=K&res=R&limit=L&rounds=N&hold_ms=H&ttl=T[&weights=1,2,..&seed=S]
 *       N holds of semaphore K (limit L), each held H ms, each of a number of
 *       permits drawn from `weights` (1 by default).
 *   op=hold&shape=read|permit|write&key=K&ttl=T&limit=L&wait=W&ctl=P&go_timeout=S[&auto=1]
 *       take a read hold, a permit or the lock alone, publish P:started (our pid)
 *       and P:token, wait until P:go exists, then release (reported).
 *
 * Any op with go=KEY increments KEY:ready, then starts only once KEY exists in the
 * control Redis (a barrier).
 *
 * Replies with JSON: the op's counts, `errors` (exceptions, check failures), pid.
 */
require __DIR__ . '/common.inc';
require __DIR__ . '/rw_common.inc';

$op = (string) app_param('op', 'hammer');
$key = (string) app_param('key', 'rw');
$res = (string) app_param('res', 'res');
$dsn = $_SERVER['RL_DSN'] ?? null;
$ctl = app_ctl();
$who = 'pid ' . getmypid();
$out = ['op' => $op, 'errors' => []];
$waitersKey = 'lock:{' . $key . '}:waiters';
// go=KEY: count ourselves in KEY:ready, then start together once KEY exists (polled every 5 ms),
// so that the workers contend from the start.
if (app_param('go') !== null) {
    $ctl->cmd('INCR', app_param('go') . ':ready');
    if (!app_await_key((string) app_param('go'), 20.0)) {
        $out['errors'][] = 'no go signal within 20 s';
    }
}

try {
    switch ($op) {
        case 'hammer':
            $out += hammer($key, $res, (string) app_param('counter', 'counter'), (int) app_param('rounds', '20'),
                (int) app_param('seed', '1'), app_param('nolock') === '1', $out['errors']);
            break;

        case 'reader_stream':
            $lock = new DistributedLock($key, 10.0, $dsn);
            // Holds of a third to all of hold_ms, at random: the readers drift out
            // of step, so that some reader is inside at any moment.
            $maxMs = (int) app_param('hold_ms', '150');
            $until = microtime(true) + (float) app_param('seconds', '3');
            $n = 0;
            while (microtime(true) < $until) {
                if (!$lock->acquireRead(10.0)) {
                    $out['errors'][] = 'acquireRead(10) gave up';
                    continue;
                }
                rw_record($ctl, $res, 'enter_r', $who);
                usleep(mt_rand(intdiv($maxMs, 3), $maxMs) * 1000);
                rw_record($ctl, $res, 'leave_r', $who);
                $lock->release() || $out['errors'][] = 'a read hold was lost';
                $n++;
            }
            $out['sections'] = $n;
            break;

        case 'writer_probes':
            $lock = new DistributedLock($key, 10.0, $dsn);
            $out['probes'] = [];
            for ($i = 0; $i < (int) app_param('probes', '5'); $i++) {
                usleep((int) app_param('gap_ms', '300') * 1000);
                // Ask while at least readers_before readers are inside (polled),
                // then time how long the lock keeps us out.
                $deadline = microtime(true) + 2.0;
                while (($asked = rw_record($ctl, $res, 'look', $who, 0, $waitersKey))[0] < (int) app_param('readers_before', '1')
                    && microtime(true) < $deadline) {
                    usleep(1000);
                }
                $t = microtime(true);
                $got = $lock->acquire(10.0);
                $wait = microtime(true) - $t;
                if (!$got) {
                    $out['errors'][] = 'acquire(10) gave up';
                    continue;
                }
                rw_record($ctl, $res, 'enter_w', $who);
                usleep((int) app_param('hold_ms', '20') * 1000);
                // Who queued behind us meanwhile (readers kept arriving).
                $left = rw_record($ctl, $res, 'leave_w', $who, 0, $waitersKey);
                $lock->release() || $out['errors'][] = 'a write hold was lost';
                $out['probes'][] = ['wait' => $wait, 'readers_at_ask' => $asked[0], 'queued_at_leave' => $left[4]];
            }
            break;

        case 'sem':
            $limit = (int) app_param('limit', '3');
            $sem = new DistributedSemaphore($key, $limit, (float) app_param('ttl', '10'), $dsn);
            $holdUs = (int) app_param('hold_ms', '5') * 1000;
            // weights=1,2,3: each round takes that many permits at once, drawn with seed.
            $weights = array_map('intval', explode(',', (string) app_param('weights', '1')));
            mt_srand((int) app_param('seed', (string) getmypid()));
            $n = 0;
            for ($i = 0; $i < (int) app_param('rounds', '10'); $i++) {
                $w = $weights[mt_rand(0, count($weights) - 1)];
                if (!$sem->acquire(30.0, $w)) {
                    $out['errors'][] = "acquire(30, $w) gave up";
                    continue;
                }
                rw_record($ctl, $res, 'enter_p', "$who ($w)", $limit, null, $w);
                usleep($holdUs);
                rw_record($ctl, $res, 'leave_p', "$who ($w)", $limit, null, $w);
                $sem->release() || $out['errors'][] = 'a permit was lost';
                $n++;
                $out['weighed'] = ($out['weighed'] ?? 0) + $w;
            }
            $out['permits'] = $n;
            break;

        case 'hold':
            $shape = (string) app_param('shape', 'read');
            $ttl = (float) app_param('ttl', '1');
            $auto = app_param('auto') === '1';
            $p = (string) app_param('ctl', 'ctl');
            $wait = (float) app_param('wait', '0');
            $obj = $shape === 'permit'
                ? new DistributedSemaphore($key, (int) app_param('limit', '1'), $ttl, $dsn, $auto)
                : new DistributedLock($key, $ttl, $dsn, $auto);
            $t = microtime(true);
            $out['acquired'] = match ($shape) {
                'read' => $obj->acquireRead($wait),
                default => $obj->acquire($wait),
            };
            $out['waited'] = microtime(true) - $t;
            $out['token'] = $obj->getToken();
            $ctl->cmd('SET', "$p:token", (string) $out['token']);
            $ctl->cmd('SET', "$p:started", (string) getmypid());
            $out['went'] = app_await_key("$p:go", (float) app_param('go_timeout', '10'));
            $out['token_after'] = $obj->getToken();
            $out['released'] = $obj->release();
            break;

        default:
            throw new ValueError("unknown op '$op'");
    }
} catch (Throwable $e) {
    $out['errors'][] = get_class($e) . ': ' . $e->getMessage();
}
app_reply($out);

/**
 * The mixed sections of op=hammer (see the top of this file). Returns how many
 * of each kind ran; check failures go to $errors.
 */
function hammer(string $key, string $res, string $counter, int $rounds, int $seed, bool $nolock, array &$errors): array
{
    $ctl = app_ctl();
    $who = 'pid ' . getmypid();
    $lock = new DistributedLock($key, 10.0, $_SERVER['RL_DSN'] ?? null);
    $maxWait = 0.0;
    $take = static function (string $how) use ($nolock, $lock, &$maxWait): bool {
        if ($nolock) {
            return true;
        }
        $t = microtime(true);
        $got = $how === 'read' ? $lock->acquireRead(10.0) : $lock->acquire(10.0);
        $maxWait = max($maxWait, microtime(true) - $t);
        return $got;
    };
    $drop = static fn() => $nolock || $lock->release();
    $rmw = static function () use ($ctl, $counter): int {
        $v = (int) $ctl->cmd('GET', $counter);
        usleep(300); // widens the race window: without exclusion updates are lost
        $ctl->cmd('SET', $counter, (string) ($v + 1));
        return $v + 1;
    };
    $n = ['read' => 0, 'write' => 0, 'down' => 0, 'up' => 0, 'up_refused' => 0, 'up_timed_out' => 0,
        'writer_sections' => 0, 'up_refused_max_s' => 0.0, 'moved' => 0, 'lapse' => 0, 'lapse_upgraded' => 0];
    mt_srand($seed);
    for ($i = 0; $i < $rounds; $i++) {
        $x = mt_rand(0, 99);
        $kind = $x < 45 ? 'read' : ($x < 65 ? 'write' : ($x < 75 ? 'down' : ($x < 85 ? 'up' : ($x < 93 ? 'moved' : 'lapse'))));
        if ($nolock && ($kind === 'moved' || $kind === 'lapse')) {
            $kind = 'read';
        }
        $sync = !$nolock && mt_rand(0, 3) === 0; // some sections through synchronized*()
        switch ($kind) {
            case 'read':
                $section = static function () use ($ctl, $res, $who, $counter, &$errors): void {
                    rw_record($ctl, $res, 'enter_r', $who);
                    $v = $ctl->cmd('GET', $counter);
                    usleep(mt_rand(500, 3000));
                    $v2 = $ctl->cmd('GET', $counter);
                    rw_record($ctl, $res, 'leave_r', $who);
                    if ($v !== $v2) {
                        $errors[] = "gap: the counter changed during a read ($v -> $v2)";
                    }
                };
                if ($sync) {
                    $lock->synchronizedRead($section, 10.0);
                } else {
                    if (!$take('read')) {
                        $errors[] = 'acquireRead(10) gave up';
                        break;
                    }
                    $section();
                    $drop() || $errors[] = 'a read hold was lost';
                }
                $n['read']++;
                break;

            case 'write':
                $section = static function () use ($ctl, $res, $who, $rmw): void {
                    rw_record($ctl, $res, 'enter_w', $who);
                    $rmw();
                    rw_record($ctl, $res, 'leave_w', $who);
                };
                if ($sync) {
                    $lock->synchronized($section, 10.0);
                } else {
                    if (!$take('write')) {
                        $errors[] = 'acquire(10) gave up';
                        break;
                    }
                    $section();
                    $drop() || $errors[] = 'a write hold was lost';
                }
                $n['write']++;
                $n['writer_sections']++;
                break;

            case 'down':
                if (!$take('write')) {
                    $errors[] = 'acquire(10) gave up';
                    break;
                }
                rw_record($ctl, $res, 'enter_w', $who);
                $mine = $rmw();
                $n['writer_sections']++;
                rw_record($ctl, $res, 'w2r', $who);
                if (!$nolock && !$lock->acquireRead()) {
                    $errors[] = 'a downgrade (acquireRead() on a write hold) returned false';
                }
                usleep(mt_rand(200, 1500)); // readers queued behind us may come in now; no writer
                $v = (int) $ctl->cmd('GET', $counter);
                if ($v !== $mine) {
                    $errors[] = "gap: after a downgrade the counter is $v, not our own write $mine";
                }
                rw_record($ctl, $res, 'leave_r', $who);
                $drop() || $errors[] = 'a downgraded hold was lost';
                $n['down']++;
                break;

            case 'up':
                if (!$take('read')) {
                    $errors[] = 'acquireRead(10) gave up';
                    break;
                }
                rw_record($ctl, $res, 'enter_r', $who);
                $seen = (int) $ctl->cmd('GET', $counter);
                usleep(mt_rand(200, 1500));
                $t = microtime(true);
                $up = $nolock || $lock->acquire(5.0);
                $took = microtime(true) - $t;
                if (!$up) {
                    // Refused at once (another reader waits to upgrade), or timed out.
                    if ($took < 1.0) {
                        $n['up_refused']++;
                        $n['up_refused_max_s'] = max($n['up_refused_max_s'], $took);
                    } else {
                        $n['up_timed_out']++;
                    }
                    rw_record($ctl, $res, 'leave_r', $who);
                    $drop() || $errors[] = 'a read hold was lost after a refused upgrade';
                    break;
                }
                rw_record($ctl, $res, 'r2w', $who);
                $v = (int) $ctl->cmd('GET', $counter);
                if ($v !== $seen) {
                    $errors[] = "gap: a writer came between an upgrade's read ($seen) and its write ($v)";
                }
                $rmw();
                $n['writer_sections']++;
                rw_record($ctl, $res, 'leave_w', $who);
                $drop() || $errors[] = 'an upgraded hold was lost';
                $n['up']++;
                break;

            case 'moved':
                // A read hold moved to another object (detach, restore), whose
                // synchronized() must see a read hold: it refuses (an upgrade is
                // acquire()'s), before running its callback. A callback that ran
                // would enter as a writer while we are inside as a reader.
                if (!$take('read')) {
                    $errors[] = 'acquireRead(10) gave up';
                    break;
                }
                rw_record($ctl, $res, 'enter_r', $who);
                $moved = DistributedLock::restore($key, (string) $lock->detach(), 10.0, $_SERVER['RL_DSN'] ?? null);
                try {
                    $moved->synchronized(static function () use ($ctl, $res, $who): void {
                        rw_record($ctl, $res, 'enter_w', $who . ' (restored read hold)');
                        rw_record($ctl, $res, 'leave_w', $who . ' (restored read hold)');
                    }, 0.0);
                    $errors[] = 'synchronized() ran its callback on a restored read hold';
                } catch (RedisLease\LeaseException $e) {
                    if (!str_contains($e->getMessage(), 'read hold')) {
                        $errors[] = 'synchronized() on a restored read hold: ' . $e->getMessage();
                    }
                }
                $moved->synchronizedRead(static fn() => null, 0.0);
                rw_record($ctl, $res, 'leave_r', $who);
                $moved->release() || $errors[] = 'a restored read hold was lost';
                $n['moved']++;
                break;

            case 'lapse':
                // A reader that lets its read lease run out while it waits to
                // upgrade (it leaves the resource first: it is not protected any
                // more). The upgrade returns false (unless it had the lock alone
                // at once); its queue place must not keep the next writer out.
                if (!$take('read')) {
                    $errors[] = 'acquireRead(10) gave up';
                    break;
                }
                rw_record($ctl, $res, 'enter_r', $who);
                usleep(mt_rand(200, 1000));
                rw_record($ctl, $res, 'leave_r', $who);
                $lock->refresh(0.05);
                if ($lock->acquire(2.0)) {
                    rw_record($ctl, $res, 'enter_w', $who);
                    $rmw();
                    $n['writer_sections']++;
                    rw_record($ctl, $res, 'leave_w', $who);
                    $drop() || $errors[] = 'an upgraded hold was lost';
                    $n['lapse_upgraded']++;
                } else {
                    $lock->release();
                }
                $n['lapse']++;
                break;
        }
    }
    return $n + ['max_wait' => $maxWait, 'metrics' => RedisLease\metrics()];
}
