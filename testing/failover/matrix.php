<?php
/*
 * The failover matrix (issue 17, part 3): real processes, one fault per cell,
 * and a checker over the recorded history.
 *
 *   php testing/failover/matrix.php [--cells=0,1,...,8] [--runs=N] [--keep=DIR]
 *                                   [--plant=ack_unwritten|unheld|logout_undone] [--judge0as1]
 *
 * Each cell starts its own topology (Sentinel: a master with 2 replicas and 3
 * sentinels, down-after 1000 ms, failover-timeout 2000 ms; Cluster: 3 masters
 * + 3 replicas), a control Redis that no fault touches, and
 * two php-fpm pools (one per wait_replicas value, 6 workers each, so a request
 * blocked in a WAIT never holds up the other value's) under a steady FastCGI
 * load of 10 requests in flight each, mixing five kinds in turn: session
 * requests in the class form and in the native form, lock requests, read/write
 * lock requests and semaphore requests, with the sessions and locks of each
 * wait_replicas value its own. On Cluster every session and lock lives on the
 * faulted master (on the moved slot for the slot move).
 *
 *   session request (app/session.php): read the session, append the request id to
 *       $_SESSION['ids'], write, report whether the handler acknowledged the write;
 *   lock request (app/lock.php): acquire (wait 2 s), fencing token, enter the
 *       guarded resource on the control Redis (fenced / OVERLAP detection in Lua),
 *       3 ms of work, exit, release; every step stamped with hrtime(true);
 *   read/write and semaphore requests (app/shared.php), on one read/write lock and
 *       one semaphore (limit 3) per wait_replicas value: reads, writes (fenced),
 *       upgrades (a read, then acquire()), downgrades (a write, then acquireRead())
 *       and 1 or 2 permits at once, each entering its own guarded resource as what it holds (a
 *       writer beside anyone, a reader beside a writer, a permit beyond the limit,
 *       a writer's fence not above the last: each logged with its time).
 *
 * Cells (a fault each, twice for S1 and S2; one row, and one test, per cell and
 * wait_replicas value):
 *   0 the issue's "done when" loop: Sentinel planned failover under native session
 *     writes paced to 400/s for each wait_replicas value (nothing else runs)
 *   1 Sentinel planned failover (SENTINEL FAILOVER),  5 Cluster CLUSTER FAILOVER (planned)
 *     then again from the new master
 *   2 Sentinel master SIGKILL, then (the killed node     6 Cluster master SIGKILL (restarted once replaced)
 *     restarted as a replica) the new master too
 *   3 Sentinel master SIGSTOP, SIGCONT once replaced  7 Cluster master SIGSTOP, SIGCONT once replaced
 *   4 Sentinel master partitioned from its sentinels  8 Cluster slot move of the live sessions and
 *     and replicas, clients still reaching it           locks' slot, under load
 *
 * The switch moment: a watcher child subscribes to every sentinel (PSUBSCRIBE *)
 * and stamps +failover-state-wait-promotion (the promotion: REPLICAOF NO ONE sent)
 * and +switch-master (the announcement) with hrtime as they arrive; on Cluster it
 * polls the faulted master's replica's ROLE every 5 ms (promotion = announcement);
 * for the slot move, the move's start and its last CLUSTER SETSLOT NODE.
 *
 * The checker (per row): acknowledged session writes missing from the session's
 * final list on the final master (with their ack time relative to the
 * announcement; unless a logout read them), acknowledged logouts undone (an id
 * a logout read back in the final list), OVERLAP and fenced entries of the guarded resources, the
 * read/write and permit violations of theirs, failed and stuck requests, the
 * longest request against the bound the timeouts give, and the time from the
 * fault until requests succeed again for good. A failover's window runs from
 * its promotion to its announcement + MX_SWITCH_BOUND (two windows in the
 * cells that fail over twice). The targets are listed with mx_verdict(). The
 * last line is "matrix: N passed, N failed".
 */

require_once __DIR__ . '/lib.php';

const MX_TIMEOUT = 0.5;            // connect_timeout and read_timeout of every DSN (s)
const MX_WAIT_TIMEOUT_MS = 500;    // wait_timeout with wait_replicas=1
const MX_PREFIX = 'MXS:';          // session key prefix
const MX_LOCK_TTL = 3.0;
const MX_LOCK_WAIT = 2.0;          // DistributedLock::acquire($wait)
const MX_SESSION_OPTIONS = ['lock_ttl' => 3, 'lock_wait' => 2.0];
const MX_WORK_US = 3000;           // time spent inside the guarded resource
const MX_WORKERS = 6;               // per pool: one pool per wait_replicas value
const MX_CONCURRENCY = 10;          // requests in flight per pool
const MX_SESSIONS = 3;             // sessions per form and wait_replicas value
const MX_LOGOUT_EVERY = 8;         // one session request in 8 is a logout (session_destroy())
const MX_LOCKS = 2;                // lock names per wait_replicas value
const MX_SEM_LIMIT = 3;            // the semaphore's permits (one read/write lock and one semaphore per wait_replicas value), taken 1 or 2 at once
// The read/write lock's requests, in turn: readers, writers, upgrades and downgrades.
const MX_RW_SHAPES = ['read', 'write', 'read', 'up', 'read', 'down'];
const MX_SWITCH_BOUND = 0.5;       // s after the announcement
const MX_STEADY = 1.5;             // recovered: every request begun in the last 1.5 s succeeded
const MX_RECOVERY_CAP = 25.0;      // s after the fault, at most
const MX_CLIENT_TIMEOUT = 30.0;    // a request with no answer by then is cut off and counted stuck
const MX_LOOP_RATE = 400.0;        // cell 0: writes/s per wait_replicas value

/*
 * The longest a request may take (worker side, from its first line to its
 * reply), from its timeouts. A request makes at most two Redis operations that
 * can each wait out a timeout before it fails (session: open, then save; lock:
 * acquire, then fence/release, which gives up after one timeout), plus the lock
 * wait, once:
 *   - an operation: a Sentinel lookup that tries the 3 sentinels (each connect +
 *     read timeout), a connect and a read timeout on the master, a WAIT of
 *     wait_timeout + read timeout, and one resend on a fresh link after a broken
 *     one (connect + read timeout again);
 *   - the lock wait: session lock_wait or DistributedLock wait (2 s).
 * A logout may make a third: its destroy, finding its lease lost, revokes
 * whoever holds (`$ops` 3).
 */
function mx_request_bound(int $ops = 2): float
{
    $cr = 2 * MX_TIMEOUT;
    $op = 3 * $cr + $cr + (MX_WAIT_TIMEOUT_MS / 1000 + MX_TIMEOUT) + $cr;
    return max(MX_LOCK_WAIT, MX_SESSION_OPTIONS['lock_wait']) + $ops * $op;
}

const MX_CELLS = [
    0 => ['name' => 'S0 done-when loop', 'topo' => 'sentinel', 'fault' => 'planned', 'planned' => true, 'loop' => true],
    1 => ['name' => 'S1 sentinel planned x2', 'topo' => 'sentinel', 'fault' => 'planned', 'planned' => true, 'twice' => true],
    2 => ['name' => 'S2 sentinel SIGKILL x2', 'topo' => 'sentinel', 'fault' => 'kill', 'planned' => false, 'twice' => true],
    3 => ['name' => 'S3 sentinel SIGSTOP', 'topo' => 'sentinel', 'fault' => 'stop', 'planned' => false],
    4 => ['name' => 'S4 sentinel partition', 'topo' => 'sentinel', 'fault' => 'partition', 'planned' => false],
    5 => ['name' => 'C5 cluster FAILOVER', 'topo' => 'cluster', 'fault' => 'planned', 'planned' => true],
    6 => ['name' => 'C6 cluster SIGKILL', 'topo' => 'cluster', 'fault' => 'kill', 'planned' => false],
    7 => ['name' => 'C7 cluster SIGSTOP', 'topo' => 'cluster', 'fault' => 'stop', 'planned' => false],
    8 => ['name' => 'C8 cluster slot move', 'topo' => 'cluster', 'fault' => 'move', 'planned' => true],
];

/* ------------------------------------------------------------------ */

function mx_opts(array $argv): array
{
    $o = ['cells' => array_keys(MX_CELLS), 'runs' => 1, 'keep' => null, 'plant' => '', 'judge0as1' => false];
    foreach (array_slice($argv, 1) as $a) {
        if (preg_match('/^--cells=([\d,]+)$/', $a, $m)) {
            $o['cells'] = array_map('intval', explode(',', $m[1]));
        } elseif (preg_match('/^--runs=(\d+)$/', $a, $m)) {
            $o['runs'] = max(1, (int) $m[1]);
        } elseif (preg_match('/^--keep=(.+)$/', $a, $m)) {
            $o['keep'] = $m[1];
        } elseif (preg_match('/^--plant=(ack_unwritten|unheld|logout_undone)$/', $a, $m)) {
            $o['plant'] = $m[1];
        } elseif ($a === '--judge0as1') {
            $o['judge0as1'] = true;
        } else {
            fwrite(STDERR, "unknown argument $a\n");
            exit(2);
        }
    }
    return $o;
}

/** A key name whose slot satisfies $ok (always true on Sentinel). */
function mx_pick(callable $make, callable $ok): string
{
    for ($i = 0; $i < 2_000_000; $i++) {
        $k = $make();
        if ($ok($k)) {
            return $k;
        }
    }
    throw new RuntimeException('no key found for the slot');
}

/** Runs cell $id; returns its rows (one per wait_replicas value). */
function mx_run_cell(int $id, int $run, array $o): array
{
    $cell = MX_CELLS[$id];
    $t0 = mx_now();
    $tag = "c{$id}r{$run}" . bin2hex(random_bytes(3));
    $topo = $watcher = null;
    $pools = [];
    $rows = [];
    try {
        $ctl = rl_start_redis(); // the guarded resources: no fault touches it
        $topo = $cell['topo'] === 'sentinel' ? new SentinelTopo($cell['fault'] === 'partition') : new ClusterTopo();
        [$wmode, $wports] = $topo->watcherArgs();
        $watcher = new MxWatcher($wmode, $wports);
        if ($wmode === 'sentinel' && !rl_wait_until(fn() => count(array_filter($watcher->poll(), fn($e) => $e['ev'] === 'subscribed')) === 3, 5.0)) {
            throw new RuntimeException('the watcher did not subscribe to the sentinels');
        }
        if ($wmode === 'cluster' && !rl_wait_until(fn() => $watcher->first('role') !== null, 5.0)) {
            throw new RuntimeException('the watcher did not see the replica');
        }

        // Sessions and locks where the fault hits.
        $slotOk = static fn(string $key): bool => true;
        $moveSlot = null;
        if ($topo instanceof ClusterTopo) {
            $slotOk = static fn(string $key): bool => $topo->onVictim(mx_slot($key));
            if ($cell['fault'] === 'move') {
                $moveSlot = mx_slot(MX_PREFIX . mx_pick(fn() => st_sid(), fn($s) => $topo->onVictim(mx_slot(MX_PREFIX . $s))));
                $slotOk = static fn(string $key): bool => mx_slot($key) === $moveSlot;
            }
        }
        $sids = $locks = $shared = [];
        foreach ([0, 1] as $w) {
            foreach (ST_FORMS as $form) {
                for ($i = 0; $i < MX_SESSIONS; $i++) {
                    $sids[$w][$form][] = mx_pick(fn() => st_sid(), fn($s) => $slotOk(MX_PREFIX . $s));
                }
            }
            for ($i = 0; $i < MX_LOCKS; $i++) {
                $locks[$w][] = mx_pick(fn() => "mx-$tag-w$w-" . bin2hex(random_bytes(4)), fn($n) => $slotOk('lock:{' . $n . '}'));
            }
            // The read/write lock's and the semaphore's keys share their name's slot.
            $shared[$w] = [
                'rw' => mx_pick(fn() => "mxrw-$tag-w$w-" . bin2hex(random_bytes(4)), fn($n) => $slotOk('lock:{' . $n . '}')),
                'sem' => mx_pick(fn() => "mxsem-$tag-w$w-" . bin2hex(random_bytes(4)), fn($n) => $slotOk('lock:{' . $n . '}')),
            ];
        }

        // One pool per wait_replicas value: a request blocked in a WAIT (wait_replicas=1)
        // never holds up the other value's requests, so each is measured on its own.
        $lanes = [];
        $loop = !empty($cell['loop']);
        foreach ([0, 1] as $w) {
            $pools[$w] = FpmPool::start(['ini' => st_common_ini() + ['session.save_handler' => 'redis_lease'],
                'max_children' => MX_WORKERS, 'request_terminate_timeout' => 60]);
            $sessionDsn = $topo->dsn($w, true);
            $lockDsn = $topo->dsn($w, false);
            $kinds = $loop ? ['native'] : ['class', 'native', 'lock', 'rw', 'sem'];
            $next = static function (int $i) use ($w, $kinds, $sids, $locks, $shared, $sessionDsn, $lockDsn, $ctl, $o, $loop): array {
                $kind = $kinds[$i % count($kinds)];
                $k = intdiv($i, count($kinds));
                $rid = 2 * $i + $w; // unique across both lanes
                if ($kind === 'rw' || $kind === 'sem') {
                    $name = $shared[$w][$kind];
                    $shape = $kind === 'sem' ? 'permit' : MX_RW_SHAPES[$k % count(MX_RW_SHAPES)];
                    // By rounds of shapes (of the permit counts, 1 and 2): plain, moved (detach +
                    // restore), refreshed, both.
                    $variant = intdiv($k, $kind === 'sem' ? 2 : count(MX_RW_SHAPES)) % 4;
                    return [FcgiClient::params(__DIR__ . '/app/shared.php',
                        ['shape' => $shape, 'name' => $name, 'rid' => $rid, 'ttl' => MX_LOCK_TTL, 'wait' => MX_LOCK_WAIT,
                            'res' => "res:$name", 'work_us' => MX_WORK_US, 'limit' => MX_SEM_LIMIT, 'permits' => 1 + $k % 2]
                            + ($variant & 1 ? ['moved' => '1'] : []) + ($variant & 2 ? ['refresh' => '1'] : [])
                            + ($o['plant'] !== '' && intdiv($k, count(MX_RW_SHAPES)) % 3 === 0 ? ['plant' => $o['plant']] : []),
                        ['RL_DSN' => $lockDsn, 'RL_CTL_PORT' => $ctl['port']]),
                        ['kind' => 'shared', 'shape' => $shape, 'w' => $w, 'name' => $name]];
                }
                if ($kind === 'lock') {
                    $name = $locks[$w][$k % MX_LOCKS];
                    return [FcgiClient::params(__DIR__ . '/app/lock.php',
                        ['name' => $name, 'rid' => $rid, 'ttl' => MX_LOCK_TTL, 'wait' => MX_LOCK_WAIT,
                            'res' => "res:$name", 'work_us' => MX_WORK_US] + ($o['plant'] !== '' && $k % 10 === 0 ? ['plant' => $o['plant']] : []),
                        ['RL_DSN' => $lockDsn, 'RL_CTL_PORT' => $ctl['port']]),
                        ['kind' => 'lock', 'w' => $w, 'name' => $name]];
                }
                $sid = $sids[$w][$kind][$k % MX_SESSIONS];
                // One request in MX_LOGOUT_EVERY logs its session out (in turn over the sessions).
                $logout = !$loop && $k % MX_LOGOUT_EVERY === MX_LOGOUT_EVERY - 1;
                return [FcgiClient::params(__DIR__ . '/app/session.php',
                    ['mode' => $kind, 'sid' => $sid, 'rid' => $rid] + ($logout ? ['logout' => '1'] : [])
                        + ($o['plant'] !== '' ? ['plant' => $o['plant']] : []),
                    ['RL_DSN' => $sessionDsn, 'RL_OPTIONS' => json_encode(MX_SESSION_OPTIONS)]),
                    ['kind' => 'session', 'form' => $kind, 'w' => $w, 'sid' => $sid, 'logout' => $logout]];
            };
            $lanes[$w] = ['client' => $pools[$w]->client(), 'concurrency' => MX_CONCURRENCY, 'next' => $next,
                'rate' => $loop ? MX_LOOP_RATE : null];
        }
        $load = new MxLoad($lanes, MX_CLIENT_TIMEOUT);

        // Warm-up: everything succeeds before the fault.
        $load->run(4.0, fn() => count($load->results) >= 150);
        $warm = array_filter($load->results, fn($r) => !mx_ok($r));
        $tSetup = mx_s(mx_now() - $t0);

        // The fault.
        $tl = mx_fault($cell, $topo, $load, $watcher);

        // Until requests succeed again for good (both wait_replicas values), bounded.
        if (!empty($cell['loop'])) {
            $load->run(4.0);
            $recovered = true;
        } else {
            $recovered = $load->run(MX_RECOVERY_CAP - mx_s(mx_now() - $tl['fault']),
                fn() => mx_steady($load->results, $tl));
            $load->run(0.3);
        }
        // The same fault again on the new master, while holds taken since the first are live.
        if (!empty($cell['twice']) && $recovered) {
            $second = mx_fault_again($cell, $topo, $load, $watcher, $tl);
            $tl['windows'][] = [$second['promotion'], $second['announce']];
            $tl['notes'][] = sprintf('second failover %.1f s after the first: promotion %+.3f s, announcement %+.3f s after its fault',
                mx_s($second['fault'] - $tl['fault']), mx_s($second['promotion'] - $second['fault']), mx_s($second['announce'] - $second['fault']));
            $tl['notes'] = [...$tl['notes'], ...$second['notes']];
            $recovered = $load->run(MX_RECOVERY_CAP - mx_s(mx_now() - $second['fault']),
                fn() => mx_steady($load->results, $second));
            $load->run(0.3);
        }
        $load->drain(MX_CLIENT_TIMEOUT);
        $tl['end'] = mx_now();

        foreach ([0, 1] as $w) {
            $rows[] = mx_check($cell, $w, $load->results, $topo, $ctl, $sids[$w], $locks[$w], $shared[$w], $tl, $recovered, $warm, $o);
        }
        if ($o['keep'] !== null || array_filter($rows, fn($r) => !$r['pass'])) {
            $dir = $o['keep'] ?? sys_get_temp_dir() . '/mx-history';
            @mkdir($dir, 0700, true);
            $file = "$dir/$tag.jsonl";
            $fh = fopen($file, 'w');
            // (A row never recovered has recovery INF, which JSON lacks: written as 0.)
            fwrite($fh, json_encode(['cell' => $cell, 'timeline' => $tl, 'events' => $watcher->events, 'rows' => $rows],
                JSON_PARTIAL_OUTPUT_ON_ERROR) . "\n");
            foreach ($load->results as $r) {
                fwrite($fh, json_encode($r, JSON_INVALID_UTF8_SUBSTITUTE) . "\n");
            }
            fclose($fh);
            foreach ($rows as &$row) {
                $row['history'] = $file;
            }
            unset($row);
        }
        foreach ($rows as &$row) {
            $row['setup'] = $tSetup;
            $row['took'] = mx_s(mx_now() - $t0);
            $row['workers_same'] = true;
        }
        unset($row);
    } catch (Throwable $e) {
        $rows = [];
        foreach ([0, 1] as $w) {
            $rows[] = ['cell' => $cell['name'], 'w' => $w, 'pass' => false,
                'why' => ['the cell could not run: ' . $e->getMessage() . ' at ' . basename($e->getFile()) . ':' . $e->getLine()]];
        }
    } finally {
        foreach ($pools as $p) {
            $p->stop();
        }
        $watcher?->stop();
        $topo?->stop();
        foreach (array_keys($GLOBALS['mx_held_ports'] ?? []) as $p) {
            mx_release_port($p);
        }
        if (isset($ctl)) {
            rl_stop_redis($ctl);
        }
    }
    return $rows;
}

/** Whether request $r succeeded. */
function mx_ok(array $r): bool
{
    $j = $r['r'];
    if ($j === null) {
        return false;
    }
    if ($j['kind'] === 'session') {
        return $j['started'] === true && $j['acked'] === true && $j['exception'] === null;
    }
    if ($j['kind'] === 'shared') {
        return $j['acquired'] === true && $j['entered'] === true && $j['released'] === true && $j['exception'] === null;
    }
    return $j['acquired'] === true && in_array($j['enter'], ['entered', 'overlap'], true)
        && $j['released'] === true && $j['exception'] === null;
}

/** When request $r began and ended (worker side when it answered, else client side), ns. */
function mx_span(array $r): array
{
    return $r['r'] !== null ? [$r['r']['t0'], $r['r']['t_end']] : [$r['c0'], $r['c1']];
}

/** Requests succeed for good: the switch was seen, and for each wait_replicas value every request begun in the last MX_STEADY s succeeded (at least 10 of them). */
function mx_steady(array $results, array $tl): bool
{
    $now = mx_now();
    $from = $now - (int) (MX_STEADY * 1e9);
    if ($from < ($tl['announce'] ?? PHP_INT_MAX)) {
        return false;
    }
    $n = [0 => 0, 1 => 0];
    for ($i = count($results) - 1; $i >= 0; $i--) {
        $r = $results[$i];
        if ($r['c1'] < $from - (int) (MX_CLIENT_TIMEOUT * 1e9)) {
            break;
        }
        if (mx_span($r)[0] < $from) {
            continue;
        }
        if (!mx_ok($r)) {
            return false;
        }
        $n[$r['meta']['w']]++;
    }
    return $n[0] >= 10 && $n[1] >= 10;
}

/**
 * Injects the cell's fault while the load runs; returns the timeline (hrtime ns):
 * fault, promotion, announce (and notes).
 */
/**
 * The second fault of a "twice" cell (Sentinel): the operator restarts a killed
 * master first (the sentinels make it a replica of the new one), then, with both
 * replicas linked again, the same fault hits the new master.
 */
function mx_fault_again(array $cell, SentinelTopo $topo, MxLoad $load, MxWatcher $watcher, array $tl): array
{
    $old = $topo->master;
    $new = $tl['new_master'];
    if ($cell['fault'] === 'kill') {
        mx_release_port($old);
        $topo->nodes[$old] = fault_start_redis([...SentinelTopo::SYNC, '--replicaof', '127.0.0.1', (string) $new], $old);
    }
    // No partition proxy in these cells: the master's address is its port.
    $topo->master = $topo->masterAddr = $new;
    $t = mx_now();
    if (!$load->run(30.0, fn() => $topo->ready())) {
        throw new RuntimeException('the topology was not whole again for the second failover: ' . $topo->describe());
    }
    $second = mx_fault($cell, $topo, $load, $watcher);
    $second['notes'][] = sprintf('both replicas linked again %.1f s before the second fault', mx_s($second['fault'] - $t));
    return $second;
}

/** Whether hrtime $t falls in a failover window: from a promotion to its announcement + MX_SWITCH_BOUND. */
function mx_in_window(int $t, array $tl): bool
{
    foreach ($tl['windows'] as [$from, $to]) {
        if ($t >= $from && $t <= $to + (int) (MX_SWITCH_BOUND * 1e9)) {
            return true;
        }
    }
    return false;
}

function mx_fault(array $cell, object $topo, MxLoad $load, MxWatcher $watcher): array
{
    $tl = ['fault' => mx_now(), 'promotion' => null, 'announce' => null, 'notes' => []];
    $switchCap = 20.0;
    if ($topo instanceof SentinelTopo) {
        $old = $topo->master;
        $pid = $topo->nodes[$old]['pid'];
        switch ($cell['fault']) {
            case 'planned':
                $tl['fault'] = mx_now();
                (new RlRaw($topo->sentinels[0]['port']))->cmd('SENTINEL', 'FAILOVER', SentinelTopo::SERVICE);
                break;
            case 'kill':
                $tl['fault'] = mx_now();
                rl_kill_pid($pid, 'KILL');
                mx_hold_port($old);
                break;
            case 'stop':
                $tl['fault'] = mx_now();
                if (!fault_pause($pid)) {
                    throw new RuntimeException('SIGSTOP did not take');
                }
                break;
            case 'partition':
                $tl['fault'] = mx_now();
                $topo->proxy->send('cut');
                $ack = json_decode((string) $topo->proxy->line(2.0), true);
                if (($ack['done'] ?? '') !== 'cut') {
                    throw new RuntimeException('the partition proxy did not cut');
                }
                $tl['notes'][] = "cut: {$ack['blackholed']} internal links blackholed ({$ack['internal']} internal, {$ack['client']} client links so far)";
                break;
        }
        $since = $tl['fault'];
        $load->run($switchCap, fn() => $watcher->first('+switch-master', $since) !== null);
        $sw = $watcher->first('+switch-master', $since);
        if ($sw === null) {
            throw new RuntimeException('no +switch-master within ' . $switchCap . ' s');
        }
        $tl['announce'] = $sw['t'];
        $tl['promotion'] = ($watcher->first('+failover-state-wait-promotion', $since)
            ?? $watcher->first('+promoted-slave', $since) ?? $sw)['t'];
        $tl['new_master'] = (int) explode(' ', (string) $sw['data'])[4]; // "<service> <old ip> <old port> <new ip> <new port>"
        if ($cell['fault'] === 'stop' || $cell['fault'] === 'partition') {
            // The old master stays cut off (reachable by clients, for the partition)
            // for one more second after the announcement, then comes back still a master.
            $load->run(1.0);
            if ($cell['fault'] === 'stop') {
                fault_resume($pid);
                $tl['resumed'] = mx_now();
            } else {
                $topo->proxy->send('heal');
                $topo->proxy->line(2.0);
                $tl['healed'] = mx_now();
            }
        }
        return $tl + ['windows' => [[$tl['promotion'], $tl['announce']]]];
    }
    /** @var ClusterTopo $topo */
    $victim = $topo->node($topo->victim);
    $promoted = static fn() => $watcher->first('role', $tl['fault'], fn($e) => $e['data'] === 'master');
    switch ($cell['fault']) {
        case 'planned':
            $tl['fault'] = mx_now();
            // A manual failover that does not complete (its election can fail) is
            // abandoned by Redis after 5 s (CLUSTER_MF_TIMEOUT); an operator asks again.
            for ($try = 1; $try <= 3; $try++) {
                (new RlRaw($topo->replica))->cmd('CLUSTER', 'FAILOVER');
                if ($load->run(6.0, fn() => $promoted() !== null)) {
                    break;
                }
                $tl['notes'][] = "CLUSTER FAILOVER try $try did not complete within 6 s";
            }
            break;
        case 'kill':
            $tl['fault'] = mx_now();
            rl_kill_pid($victim['pid'], 'KILL');
            mx_hold_port($victim['port']);
            break;
        case 'stop':
            $tl['fault'] = mx_now();
            if (!fault_pause($victim['pid'])) {
                throw new RuntimeException('SIGSTOP did not take');
            }
            break;
        case 'move':
            $slot = null;
            foreach ($load->results as $r) {
                if ($r['meta']['kind'] === 'session') {
                    $slot = mx_slot(MX_PREFIX . $r['meta']['sid']);
                    break;
                }
            }
            $to = null;
            foreach ((new RlRaw($topo->replica))->cmd('CLUSTER', 'SLOTS') as $range) {
                if ((int) $range[2][1] !== $topo->victim) {
                    $to = (int) $range[2][1];
                }
            }
            $keys = (new RlRaw($topo->victim))->cmd('CLUSTER', 'COUNTKEYSINSLOT', $slot);
            $tl['fault'] = $tl['promotion'] = mx_now();
            fault_cluster_move_slot($topo->nodes, $slot, $to, fn() => $load->run(0.01)); // about redis-cli reshard's pace
            $tl['announce'] = mx_now();
            $tl['notes'][] = "moved slot $slot with $keys keys to the master on $to";
            return $tl + ['windows' => [[$tl['promotion'], $tl['announce']]]];
    }
    $load->run($switchCap, fn() => $promoted() !== null);
    $p = $promoted();
    if ($p === null) {
        throw new RuntimeException('the replica was not promoted within ' . $switchCap . ' s');
    }
    $tl['promotion'] = $tl['announce'] = $p['t'];
    if ($cell['fault'] === 'kill') {
        // The operator restarts the dead node: it rejoins as the new master's replica
        // (3 masters + 3 replicas: without it the new master has none, and
        // wait_replicas=1 could never be met again).
        mx_release_port($victim['port']);
        fault_start_cluster_node($victim['dir'], $victim['port']);
        $tl['restarted'] = mx_now();
    } elseif ($cell['fault'] === 'stop') {
        $load->run(1.0);
        fault_resume($victim['pid']);
        $tl['resumed'] = mx_now();
    }
    return $tl + ['windows' => [[$tl['promotion'], $tl['announce']]]];
}

/** The checker: one row of the table for cell $cell and wait_replicas=$w. */
function mx_check(array $cell, int $w, array $all, object $topo, array $ctl, array $sids, array $locks, array $shared,
                  array $tl, bool $recovered, array $warm, array $o): array
{
    $rs = array_values(array_filter($all, fn($r) => $r['meta']['w'] === $w));
    $ann = $tl['announce'];
    $bound = $ann + (int) (MX_SWITCH_BOUND * 1e9);
    $row = ['cell' => $cell['name'], 'w' => $w, 'ok' => 0, 'failed' => 0, 'stuck' => 0, 'acked' => 0,
        'lost' => 0, 'lost_list' => [], 'lost_after' => 0, 'lost_window' => 0, 'lost_examples' => [], 'overlaps' => 0, 'overlaps_after' => 0,
        'fenced' => 0, 'longest' => 0.0, 'over' => -1.0e9, 'recovery' => 0.0, 'stall' => null, 'rate' => null,
        'switch' => mx_s($ann - $tl['fault']), 'promo' => mx_s($tl['promotion'] - $tl['fault']), 'notes' => $tl['notes'],
        'failures' => [], 'shared_ok' => 0, 'viol' => 0, 'viol_after' => 0, 'sfenced' => 0,
        'logouts' => 0, 'undone' => 0, 'undone_after' => 0, 'undone_examples' => [], 'revoked' => 0,
        'shapes' => ['read' => 0, 'write' => 0, 'up' => 0, 'upgraded' => 0, 'down' => 0, 'downgraded' => 0, 'permit' => 0,
            'moved' => 0, 'refreshed' => 0, 'moved permits' => 0, 'refreshed permits' => 0]];

    // (c) requests failed, the longest, stuck ones.
    usort($rs, fn($a, $b) => mx_span($a)[0] <=> mx_span($b)[0]);
    $lastFail = null;
    foreach ($rs as $i => $r) {
        [$b, $e] = mx_span($r);
        $row['longest'] = max($row['longest'], mx_s($e - $b));
        $over = mx_s($e - $b) - mx_request_bound(($r['meta']['logout'] ?? false) ? 3 : 2);
        $row['over'] = max($row['over'], $over);
        if (mx_ok($r)) {
            $row['ok']++;
            continue;
        }
        $row['failed']++;
        if ($r['r'] === null) {
            $row['stuck'] += str_contains((string) $r['error'], 'no answer') ? 1 : 0;
        }
        if ($e >= $tl['fault']) {
            $lastFail = $i;
        }
        $why = $r['r'] === null ? $r['error'] : ($r['r']['exception'] ?? ($r['r']['warnings'][0] ?? json_encode(
            array_intersect_key($r['r'], array_flip(['acquired', 'enter', 'released', 'started', 'acked'])))));
        $k = preg_replace('/\d+(\.\d+)?/', 'N', substr((string) $why, 0, 90));
        $row['failures'][$k] = ($row['failures'][$k] ?? 0) + 1;
    }
    arsort($row['failures']);
    // (d) recovery: the first request begun after the last failure.
    if ($lastFail !== null) {
        $after = $rs[$lastFail + 1] ?? null;
        $row['recovery'] = $after === null ? INF : max(0.0, mx_s(mx_span($after)[0] - $tl['fault']));
    }

    // (a) acknowledged writes lost: every acked id must be in its session's final list,
    // unless a logout read it (and so may have deleted it: even one not acknowledged).
    $final = [];
    foreach ($sids as $form => $list) {
        foreach ($list as $sid) {
            $data = st_decode($topo->finalGet(MX_PREFIX . $sid));
            $final[$sid] = array_flip(array_map('intval', $data['ids'] ?? []));
        }
    }
    // Ids a logout read (and so may have deleted: even one not acknowledged), and
    // the spans in which a logout whose lease was lost revoked whoever held: an
    // acknowledged write in one may be gone with it.
    $loggedOut = [];
    $revoking = [];
    $bySid = [];
    foreach ($rs as $r) {
        if ($r['meta']['kind'] !== 'session' || $r['r'] === null) {
            continue;
        }
        $bySid[$r['meta']['sid']][] = $r;
        if (!($r['meta']['logout'] ?? false)) {
            continue;
        }
        foreach ($r['r']['read'] ?? [] as $id) {
            $loggedOut[$r['meta']['sid']][$id] = true;
        }
        if (($r['r']['revoking'] ?? false) && isset($r['r']['t_ack'])) {
            $revoking[$r['meta']['sid']][] = [$r['r']['t_read'], $r['r']['t_ack'], array_flip($r['r']['read'] ?? [])];
        }
    }
    // (a') a logout acknowledged stays done: no id it read is read by a request of
    // its session begun after its acknowledgement, nor is in the final data (a
    // failover that undid it would bring them back).
    foreach ($rs as $r) {
        if (!($r['meta']['logout'] ?? false) || ($r['r']['acked'] ?? false) !== true) {
            continue;
        }
        $row['logouts']++;
        $sid = $r['meta']['sid'];
        $gone = array_flip($r['r']['read'] ?? []);
        $back = array_keys(array_intersect_key($gone, $final[$sid] ?? []));
        foreach ($bySid[$sid] ?? [] as $later) {
            if ($later['r']['t0'] > $r['r']['t_ack']) {
                $back = array_merge($back, array_keys(array_intersect_key($gone, array_flip($later['r']['read'] ?? []))));
            }
        }
        if ($back !== []) {
            $row['undone']++;
            $at = $r['r']['t_ack'];
            $row['undone_after'] += !mx_in_window($at, $tl) && $at > $bound ? 1 : 0;
            if (count($row['undone_examples']) < 4) {
                $row['undone_examples'][] = sprintf('%s #%d acked %+.3f s from the announcement, ids back: %s',
                    $r['r']['mode'], $r['r']['rid'], mx_s($at - $ann), implode(',', array_slice(array_unique($back), 0, 5)));
            }
        }
    }
    foreach ($rs as $r) {
        if ($r['meta']['kind'] !== 'session' || ($r['meta']['logout'] ?? false) || ($r['r']['acked'] ?? false) !== true) {
            continue;
        }
        // Refused because a logout revoked it (answered true, quietly): nothing written.
        if ($r['r']['revoked'] ?? false) {
            $row['revoked']++;
            continue;
        }
        $row['acked']++;
        $sid = $r['meta']['sid'];
        $at = $r['r']['t_ack'];
        // Acknowledged within a revoking logout's span, having read what it read
        // (so before its delete; anything, if it read nothing).
        $seen = array_flip($r['r']['read'] ?? []);
        $revoked = array_filter($revoking[$sid] ?? [], fn($span) => $at >= $span[0] && $at <= $span[1]
            && ($span[2] === [] || array_intersect_key($span[2], $seen) !== []));
        if (isset($loggedOut[$sid][$r['r']['rid']]) || $revoked !== []) {
            continue;
        }
        if (!isset($final[$r['meta']['sid']][$r['r']['rid']])) {
            $row['lost']++;
            $at = $r['r']['t_ack'];
            if (mx_in_window($at, $tl)) {
                $row['lost_window']++;
            } elseif ($at > $bound) {
                $row['lost_after']++;
            }
            $row['lost_list'][] = [$r['r']['rid'], $r['r']['mode'], $r['r']['pid'], round(mx_s($at - $ann), 4), mx_s($r['r']['t_ack'] - $r['r']['t_write'])];
            if (count($row['lost_examples']) < 4) {
                $row['lost_examples'][] = sprintf('%s #%d acked %+.3f s from the announcement', $r['r']['mode'], $r['r']['rid'], mx_s($at - $ann));
            }
        }
    }

    // (b) overlapping holds and fenced entries, from the guarded resources' logs.
    $raw = new RlRaw($ctl['port']);
    foreach ($locks as $name) {
        foreach ($raw->cmd('LRANGE', "res:$name:overlaps", 0, -1) as $ev) {
            $ev = json_decode($ev, true);
            $row['overlaps']++;
            $t = (int) $ev['t'];
            if (!mx_in_window($t, $tl)) {
                $row['overlaps_after']++;
            }
            $row['notes'][] = sprintf('OVERLAP on %s: #%s (token %d) entered %+.3f s from the announcement while %s was inside',
                $name, $ev['rid'], $ev['token'], mx_s($t - $ann), json_encode($ev['inside']));
        }
        $row['fenced'] += $raw->cmd('LLEN', "res:$name:fenced");
    }

    // (b') read/write lock and semaphore: holders inside their resources (a writer
    // beside anyone, a permit beyond the limit), writers' fences.
    foreach ($rs as $r) {
        if ($r['meta']['kind'] !== 'shared') {
            continue;
        }
        $row['shared_ok'] += mx_ok($r) ? 1 : 0;
        if (mx_ok($r)) {
            $row['shapes'][$r['meta']['shape']]++;
            $row['shapes']['upgraded'] += ($r['r']['converted'] ?? null) === true && $r['meta']['shape'] === 'up' ? 1 : 0;
            $row['shapes']['downgraded'] += ($r['r']['converted'] ?? null) === true && $r['meta']['shape'] === 'down' ? 1 : 0;
            $permit = $r['meta']['shape'] === 'permit';
            foreach (['moved', 'refreshed'] as $how) {
                if (($r['r'][$how] ?? null) === true) {
                    $row['shapes'][$how]++;
                    $row['shapes']["$how permits"] += $permit ? 1 : 0;
                }
            }
        }
    }
    foreach ($shared as $name) {
        foreach ($raw->cmd('LRANGE', "res:$name:violations", 0, -1) as $ev) {
            $ev = json_decode($ev, true);
            $row['viol']++;
            $t = (int) $ev['t'];
            if (!mx_in_window($t, $tl)) {
                $row['viol_after']++;
            }
            $row['notes'][] = sprintf('%s on %s: %s %+.3f s from the announcement (inside: %d readers, %d writers, %d permits)',
                strtoupper($ev['what']), $name, $ev['who'], mx_s($t - $ann), $ev['readers'], $ev['writers'], $ev['permits']);
        }
        $row['sfenced'] += $raw->cmd('LLEN', "res:$name:fenced");
    }

    // The "done when" loop: pace and stalls after the announcement.
    if (!empty($cell['loop'])) {
        $acks = [];
        foreach ($rs as $r) {
            if (($r['r']['acked'] ?? false) === true) {
                $acks[] = $r['r']['t_ack'];
            }
        }
        sort($acks);
        $prev = $ann;
        $stall = 0.0;
        foreach ($acks as $t) {
            if ($t > $ann) {
                $stall = max($stall, mx_s($t - $prev));
                $prev = $t;
            }
        }
        $row['stall'] = max($stall, mx_s($tl['end'] - $prev) > 1.0 ? mx_s($tl['end'] - $prev) : 0.0);
        $span = mx_s(end($acks) - $acks[0]);
        $row['rate'] = $span > 0 ? count($acks) / $span : 0.0;
    }
    $row['warm_failed'] = count(array_filter($warm, fn($r) => $r['meta']['w'] === $w));
    [$row['pass'], $row['why']] = mx_verdict($cell, $w, $row, $recovered, $o);
    return $row;
}

/**
 * The targets (issue 17):
 *  every row: no request stuck, none longer than mx_request_bound() (a logout:
 *    mx_request_bound(3)); requests
 *    succeed again for good within MX_RECOVERY_CAP; a clean warm-up;
 *  wait_replicas=1: 0 acknowledged writes lost, 0 acknowledged logouts undone,
 *    0 overlapping holds, 0 fenced entries (a fenced entry is a second holder
 *    the fence caught), 0 read/write or permit violations;
 *  wait_replicas=0: planned cells (Sentinel planned, CLUSTER FAILOVER, slot move)
 *    lose nothing acknowledged (nor undo a logout) later than MX_SWITCH_BOUND
 *    after the announcement;
 *    every cell: no overlap and no read/write or permit violation outside the
 *    windows; what else is lost is measured, no target;
 *  every cell but 0: each kind of shared hold (read, write, upgrade, downgrade,
 *    permit) succeeded at least once (something of it was checked), and a
 *    logout was acknowledged;
 *  cell 0 (the "done when" loop): as above, and with wait_replicas=1 no stall
 *    over 2 s once the new master is named.
 * --judge0as1 judges wait_replicas=0 rows by the wait_replicas=1 targets (to show
 * that the checker fails a run that loses writes).
 */
function mx_verdict(array $cell, int $w, array $row, bool $recovered, array $o): array
{
    $why = [];
    $strict = $w === 1 || $o['judge0as1'];
    if ($row['warm_failed'] > 0) {
        $why[] = "{$row['warm_failed']} requests failed before the fault";
    }
    if ($row['stuck'] > 0) {
        $why[] = "{$row['stuck']} requests stuck (no answer within " . MX_CLIENT_TIMEOUT . ' s)';
    }
    if ($row['over'] > 0) {
        $why[] = sprintf('a request took %.2f s over its bound (%.2f s, a logout\'s %.2f s)', $row['over'],
            mx_request_bound(), mx_request_bound(3));
    }
    if (!$recovered) {
        $why[] = 'requests did not succeed again for good within ' . MX_RECOVERY_CAP . ' s';
    }
    if ($strict) {
        if ($row['lost'] > 0) {
            $why[] = "{$row['lost']} acknowledged writes lost";
        }
        if ($row['undone'] > 0) {
            $why[] = "{$row['undone']} acknowledged logouts undone";
        }
        if ($row['overlaps'] > 0) {
            $why[] = "{$row['overlaps']} overlapping holds";
        }
        if ($row['fenced'] > 0) {
            $why[] = "{$row['fenced']} fenced entries (two holders)";
        }
        if ($row['viol'] > 0) {
            $why[] = "{$row['viol']} read/write or permit violations";
        }
        if ($row['sfenced'] > 0) {
            $why[] = "{$row['sfenced']} fenced writers of the read/write lock (two holders)";
        }
    } else {
        if ($cell['planned'] && $row['lost_after'] > 0) {
            $why[] = "{$row['lost_after']} writes acknowledged after the switch bound lost";
        }
        if ($cell['planned'] && $row['undone_after'] > 0) {
            $why[] = "{$row['undone_after']} logouts acknowledged after the switch bound undone";
        }
        if ($row['overlaps_after'] > 0) {
            $why[] = "{$row['overlaps_after']} overlapping holds outside the switch window";
        }
        if ($row['viol_after'] > 0) {
            $why[] = "{$row['viol_after']} read/write or permit violations outside the switch window";
        }
    }
    if (empty($cell['loop']) && ($row['shapes']['read'] === 0 || $row['shapes']['write'] === 0 || $row['shapes']['up'] === 0
            || $row['shapes']['down'] === 0 || $row['shapes']['permit'] === 0
            || $row['shapes']['moved permits'] === 0 || $row['shapes']['moved'] === $row['shapes']['moved permits']
            || $row['shapes']['refreshed permits'] === 0
            || $row['shapes']['refreshed'] === $row['shapes']['refreshed permits'])) {
        $why[] = 'a kind of shared hold (or its moved or refreshed form) never succeeded: nothing was checked of it ('
            . json_encode($row['shapes']) . ')';
    }
    if (!empty($cell['loop']) && $w === 1 && $row['stall'] > 2.0) {
        $why[] = sprintf('the write loop stalled %.2f s after the new master was named', $row['stall']);
    }
    if ($row['acked'] === 0) {
        $why[] = 'no write was acknowledged: nothing was checked';
    }
    if (empty($cell['loop']) && $row['logouts'] === 0) {
        $why[] = 'no logout was acknowledged: nothing was checked of them';
    }
    return [$why === [], $why];
}

function mx_print_rows(array $rows): void
{
    printf("%-24s %4s %11s %6s %-16s %-10s %6s %-13s %8s %8s %8s %s\n", 'cell', 'wait', 'ok/failed', 'acked',
        'lost(win/after)', 'overlap(a)', 'fenced', 'rw+sem viol(a)', 'longest', 'recover', 'switch', 'verdict');
    foreach ($rows as $r) {
        if (!isset($r['ok'])) {
            printf("%-22s %4d %s\n", $r['cell'], $r['w'], 'FAIL: ' . implode('; ', $r['why']));
            continue;
        }
        printf("%-24s %4d %11s %6d %-16s %-10s %6d %-13s %7.2fs %7.2fs %7.2fs %s\n", $r['cell'], $r['w'],
            "{$r['ok']}/{$r['failed']}", $r['acked'], "{$r['lost']}({$r['lost_window']}/{$r['lost_after']})",
            "{$r['overlaps']}({$r['overlaps_after']})", $r['fenced'] + $r['sfenced'], "{$r['viol']}({$r['viol_after']})",
            $r['longest'], $r['recovery'], $r['switch'], $r['pass'] ? 'PASS' : 'FAIL: ' . implode('; ', $r['why']));
    }
}

function mx_print_details(array $rows): void
{
    foreach ($rows as $r) {
        if (!isset($r['ok'])) {
            continue;
        }
        $bits = [];
        if ($r['stall'] !== null) {
            $bits[] = sprintf('loop: %.0f acked writes/s, longest gap between acks after the announcement %.3f s', $r['rate'], $r['stall']);
        }
        $bits[] = sprintf('promotion %+.3f s, announcement %+.3f s after the fault', $r['promo'], $r['switch']);
        $sh = $r['shapes'];
        $bits[] = sprintf('read/write lock and semaphore: %d requests ok: %d reads, %d writes, %d upgrades asked (%d granted), '
            . '%d downgrades (%d converted), %d permits (limit %d); %d moved (detached, restored), %d refreshed',
            $r['shared_ok'], $sh['read'], $sh['write'], $sh['up'], $sh['upgraded'], $sh['down'], $sh['downgraded'],
            $sh['permit'], MX_SEM_LIMIT, $sh['moved'], $sh['refreshed']);
        $bits[] = sprintf('sessions: %d logouts acknowledged, %d undone; %d writes refused as revoked by a logout',
            $r['logouts'], $r['undone'], $r['revoked']);
        if ($r['undone_examples'] !== []) {
            $bits[] = 'undone: ' . implode(', ', $r['undone_examples']);
        }
        if ($r['lost_examples'] !== []) {
            $last = max(array_column($r['lost_list'], 3));
            $bits[] = sprintf('lost (acked %+.3f to %+.3f s from the announcement): ', min(array_column($r['lost_list'], 3)), $last)
                . implode(', ', $r['lost_examples']);
        }
        if ($r['failures'] !== []) {
            $bits[] = 'failures: ' . implode(' | ', array_map(fn($k, $n) => "$n x $k", array_keys(array_slice($r['failures'], 0, 3)),
                array_slice($r['failures'], 0, 3)));
        }
        foreach (array_slice($r['notes'], 0, 4) as $n) {
            $bits[] = $n;
        }
        if (isset($r['history'])) {
            $bits[] = "history: {$r['history']}";
        }
        printf("  %s w=%d: %s\n", $r['cell'], $r['w'], implode("\n      ", $bits));
    }
}

/* ------------------------------------------------------------------ */

if (realpath($_SERVER['SCRIPT_FILENAME'] ?? '') === realpath(__FILE__)) {
    $o = mx_opts($argv);
    $t0 = mx_now();
    printf("failover matrix: timeouts connect/read %.1f s, wait_timeout %d ms, lock wait %.1f s, session lock_wait %.1f s: "
        . "request bound %.1f s; switch bound %.1f s\n", MX_TIMEOUT, MX_WAIT_TIMEOUT_MS, MX_LOCK_WAIT,
        MX_SESSION_OPTIONS['lock_wait'], mx_request_bound(), MX_SWITCH_BOUND);
    $passed = $failed = 0;
    $allRuns = [];
    for ($run = 1; $run <= $o['runs']; $run++) {
        $tr = mx_now();
        $rows = [];
        foreach ($o['cells'] as $id) {
            $tc = mx_now();
            $cellRows = mx_run_cell($id, $run, $o);
            $rows = array_merge($rows, $cellRows);
            printf("[run %d] %s: %.1f s (%s)\n", $run, MX_CELLS[$id]['name'], mx_s(mx_now() - $tc),
                implode(', ', array_map(fn($r) => "w{$r['w']} " . ($r['pass'] ? 'pass' : 'FAIL'), $cellRows)));
        }
        printf("\nrun %d of %d (%.1f s):\n", $run, $o['runs'], mx_s(mx_now() - $tr));
        mx_print_rows($rows);
        mx_print_details($rows);
        foreach ($rows as $r) {
            $r['pass'] ? $passed++ : $failed++;
        }
        $allRuns[] = $rows;
    }
    if ($o['runs'] > 1) {
        echo "\nacross {$o['runs']} runs (min-max):\n";
        printf("%-22s %4s %9s %11s %11s %9s %9s %13s %13s %7s\n", 'cell', 'wait', 'passed', 'ok', 'failed', 'lost', 'lost-aft',
            'longest', 'recovery', 'overlap');
        $by = [];
        foreach ($allRuns as $rows) {
            foreach ($rows as $r) {
                $by[$r['cell'] . '|' . $r['w']][] = $r;
            }
        }
        foreach ($by as $k => $rs) {
            [$cell, $w] = explode('|', $k);
            $mm = function (string $f, string $fmt = '%d') use ($rs): string {
                $v = array_map(fn($r) => $r[$f] ?? NAN, $rs);
                return sprintf("$fmt-$fmt", min($v), max($v));
            };
            printf("%-22s %4s %9s %11s %11s %9s %9s %13s %13s %7s\n", $cell, $w,
                count(array_filter($rs, fn($r) => $r['pass'])) . '/' . count($rs), $mm('ok'), $mm('failed'), $mm('lost'),
                $mm('lost_after'), $mm('longest', '%.2f'), $mm('recovery', '%.2f'), $mm('overlaps'));
        }
    }
    printf("\nfailover matrix took %.1f s\n", mx_s(mx_now() - $t0));
    $counts = getenv('MATRIX_COUNTS_FILE');
    if (is_string($counts) && $counts !== '') {
        file_put_contents($counts, "$passed $failed\n");
    }
    echo "matrix: $passed passed, $failed failed\n";
    exit($failed === 0 ? 0 : 1);
}
