--TEST--
Fault: pcntl_fork() with a warm connection (class and native session forms): parent and child each run 200 interleaved session writes, lock cycles and shared-counter increments on their own connections, with no mixed-up replies; the child never writes, unlocks or releases what the parent holds
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const ROUNDS = 200;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$options = ['lock_ttl' => 10.0, 'lock_wait' => 5.0];

// Runs in a CLI child of each session form (st_child: common.inc loaded, $mode set).
// It warms up its connection, takes a lock it keeps across the fork, forks, and
// then parent and child each work on their own session, their own lock and one
// shared counter guarded by a shared lock. The forked child reports through a
// file (stdout belongs to the parent); the parent answers with one JSON line.
$code = <<<'PHP'
if ($mode === 'class') {
    session_set_save_handler(new RedisLockingSessionHandler($_SERVER['RL_DSN'], json_decode($_SERVER['RL_OPTIONS'], true)), true);
}
$cfg = json_decode(fgets(STDIN), true);

/** ROUNDS of: a session write, a lock cycle, a guarded increment. Returns the first problem, or null. */
function work(array $cfg, string $who): ?string
{
    $GLOBALS['t_work'] = [microtime(true)];
    $raw = new RlRaw($cfg['port']); // made after the fork: a connection of this process
    $own = new DistributedLock($cfg["lock_$who"], 10.0, $cfg['dsn']);
    $shared = new DistributedLock($cfg['shared'], 10.0, $cfg['dsn']);
    $lastFence = 0;
    for ($i = 1; $i <= $cfg['rounds']; $i++) {
        $GLOBALS['app_warnings'] = [];
        session_id($cfg["sid_$who"]);
        if (!session_start()) {
            return "$who round $i: session_start() failed: " . json_encode(app_warning_messages());
        }
        if (($_SESSION['n'] ?? 0) !== $i - 1 || ($_SESSION['who'] ?? $who) !== $who) {
            return "$who round $i: read " . json_encode($_SESSION) . ', expected n=' . ($i - 1);
        }
        $_SESSION['n'] = $i;
        $_SESSION['who'] = $who;
        session_write_close();
        if (app_warning_messages() !== []) {
            return "$who round $i: session warnings " . json_encode(app_warning_messages());
        }
        $r = [$own->acquire(), $own->isAcquired(), $own->getFencingToken() > $lastFence];
        $lastFence = (int) $own->getFencingToken();
        $r[] = $own->release();
        if ($r !== [true, true, true, true]) {
            return "$who round $i: lock cycle " . json_encode($r);
        }
        // A read-modify-write that only mutual exclusion keeps exact.
        $shared->synchronized(static function () use ($raw, $cfg): void {
            $v = (int) $raw->cmd('GET', $cfg['counter']);
            $raw->cmd('SET', $cfg['counter'], (string) ($v + 1));
        }, 5.0);
    }
    $GLOBALS['t_work'][] = microtime(true);
    return null;
}

// Before the fork: this process's pooled connection is open and a lock is held.
$kept = new DistributedLock($cfg['lock_kept'], 30.0, $cfg['dsn']);
$kept->acquire();
session_id($cfg['sid_warm']);
session_start();
$_SESSION['warm'] = 1;
session_write_close();

$pid = pcntl_fork();
if ($pid === 0) {
    try {
        $problem = work($cfg, 'child');
    } catch (Throwable $e) {
        $problem = 'child: ' . get_class($e) . ': ' . $e->getMessage();
    }
    file_put_contents($cfg['child_result'], json_encode(['problem' => $problem, 't' => $GLOBALS['t_work']]));
    exit(0); // a normal exit: shutdown and destructors run, $kept included
}
try {
    $problem = work($cfg, 'parent');
} catch (Throwable $e) {
    $problem = 'parent: ' . get_class($e) . ': ' . $e->getMessage();
}
// Wait for the forked child, bounded; killed if it does not end.
$reaped = false;
$st = 0;
$deadline = microtime(true) + 30;
while (!$reaped && microtime(true) < $deadline) {
    $reaped = pcntl_waitpid($pid, $st, WNOHANG) === $pid;
    if (!$reaped) {
        usleep(5000);
    }
}
if (!$reaped) {
    rl_kill_pid($pid, 'KILL');
    pcntl_waitpid($pid, $st);
}
$status = $reaped && pcntl_wifexited($st) ? pcntl_wexitstatus($st) : null;
$out = ['parent' => $problem, 't' => $GLOBALS['t_work'], 'child_exit' => $status, 'kept_held' => $kept->isAcquired(),
    'kept_fence' => $kept->getFencingToken()];

// Part 2: the parent holds a session open across a fork; the child just exits.
$GLOBALS['app_warnings'] = [];
session_id($cfg['sid_open']);
session_start();
$_SESSION['parent'] = 'P';
$raw = new RlRaw($cfg['port']);
$out['open_lock_before'] = $raw->cmd('GET', $cfg['open_lock']);
$pid = pcntl_fork();
if ($pid === 0) {
    exit(0); // PHP's shutdown runs here with the session still open
}
pcntl_waitpid($pid, $st);
$out['open_lock_after_child'] = $raw->cmd('GET', $cfg['open_lock']);
$out['open_data_after_child'] = $raw->cmd('GET', $cfg['open_data']);
session_write_close();
$out['open_write_warnings'] = app_warning_messages();
$out['open_data_final'] = $raw->cmd('GET', $cfg['open_data']);
$kept->release();
fwrite(STDOUT, json_encode($out) . "\n");
PHP;

/** $j[$key], null included; 'no answer' when the child did not report it. */
function field(array $j, string $key): mixed
{
    return array_key_exists($key, $j) ? $j[$key] : 'no answer';
}

foreach (ST_FORMS as $form) {
    $cfg = [
        'dsn' => $dsn, 'port' => $port, 'rounds' => ROUNDS,
        'sid_parent' => st_sid(), 'sid_child' => st_sid(), 'sid_warm' => st_sid(), 'sid_open' => st_sid(),
        'lock_parent' => rl_key('fork-parent'), 'lock_child' => rl_key('fork-child'),
        'lock_kept' => rl_key('fork-kept'), 'shared' => rl_key('fork-shared'), 'counter' => rl_key('fork-counter'),
        'child_result' => rl_tempfile('.json'),
    ];
    $cfg['open_lock'] = st_lock_key($cfg['sid_open']);
    $cfg['open_data'] = st_data_key($cfg['sid_open']);
    $c = st_child($form, $dsn, $options, $code);
    $c->send(json_encode($cfg));
    $j = st_child_json($c, 60.0) ?? [];
    $child = json_decode((string) @file_get_contents($cfg['child_result']), true) ?? ['problem' => 'no result file'];
    rl_same("$form: the forked child exited with 0", 0, field($j, 'child_exit'));
    rl_same("$form: the parent's " . ROUNDS . ' rounds all went as expected', null, field($j, 'parent'));
    rl_same("$form: the child's " . ROUNDS . ' rounds all went as expected', null, $child['problem']);
    // Both worked at the same time: their working times overlap.
    [$p0, $p1] = (is_array($j['t'] ?? null) ? $j['t'] : []) + [0, 0];
    [$c0, $c1] = (is_array($child['t'] ?? null) ? $child['t'] : []) + [0, 0];
    rl_ok("$form: parent and child worked at the same time", max($p0, $c0) < min($p1, $c1),
        sprintf('parent %.3f..%.3f, child %.3f..%.3f', $p0, $p1, $c0, $c1));
    rl_same("$form: parent's session counted its own rounds", ['n' => ROUNDS, 'who' => 'parent'],
        st_decode($raw->cmd('GET', st_data_key($cfg['sid_parent']))));
    rl_same("$form: child's session counted its own rounds", ['n' => ROUNDS, 'who' => 'child'],
        st_decode($raw->cmd('GET', st_data_key($cfg['sid_child']))));
    rl_same("$form: the shared counter saw every guarded increment of both", (string) (2 * ROUNDS), $raw->cmd('GET', $cfg['counter']));
    rl_same("$form: the lock kept across the fork was still the parent's after the child exited", true, field($j, 'kept_held'));
    rl_same("$form: no lock or session lock left", [], array_merge($raw->cmd('KEYS', 'lock:{fork-*}'),
        $raw->cmd('KEYS', '{' . ST_PREFIX . '*}:lock')));
    // Part 2.
    rl_ok("$form: the parent held its session's lock before the fork", is_string(field($j, 'open_lock_before')));
    rl_same("$form: a child exiting with the parent's session open leaves its lock to the parent",
        field($j, 'open_lock_before'), field($j, 'open_lock_after_child'));
    rl_same("$form: and does not write the parent's session", null, field($j, 'open_data_after_child'));
    rl_same("$form: the parent's own write then succeeds without a warning", [], field($j, 'open_write_warnings'));
    rl_same("$form: the parent's data is stored", ['parent' => 'P'], st_decode(field($j, 'open_data_final')));
    rl_same("$form: the child process exits cleanly", 0, $c->wait(10.0));
}
echo "done\n";
?>
--EXPECT--
ok: class: the forked child exited with 0
ok: class: the parent's 200 rounds all went as expected
ok: class: the child's 200 rounds all went as expected
ok: class: parent and child worked at the same time
ok: class: parent's session counted its own rounds
ok: class: child's session counted its own rounds
ok: class: the shared counter saw every guarded increment of both
ok: class: the lock kept across the fork was still the parent's after the child exited
ok: class: no lock or session lock left
ok: class: the parent held its session's lock before the fork
ok: class: a child exiting with the parent's session open leaves its lock to the parent
ok: class: and does not write the parent's session
ok: class: the parent's own write then succeeds without a warning
ok: class: the parent's data is stored
ok: class: the child process exits cleanly
ok: native: the forked child exited with 0
ok: native: the parent's 200 rounds all went as expected
ok: native: the child's 200 rounds all went as expected
ok: native: parent and child worked at the same time
ok: native: parent's session counted its own rounds
ok: native: child's session counted its own rounds
ok: native: the shared counter saw every guarded increment of both
ok: native: the lock kept across the fork was still the parent's after the child exited
ok: native: no lock or session lock left
ok: native: the parent held its session's lock before the fork
ok: native: a child exiting with the parent's session open leaves its lock to the parent
ok: native: and does not write the parent's session
ok: native: the parent's own write then succeeds without a warning
ok: native: the parent's data is stored
ok: native: the child process exits cleanly
done
