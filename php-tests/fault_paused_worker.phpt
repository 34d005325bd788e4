--TEST--
Fault: a php-fpm worker paused with SIGSTOP past its lease while holding a session (class and native forms) or a DistributedLock in synchronized(): another request takes over; after SIGCONT the paused one's write and unlock are refused, the newer data is intact, and the pool's metrics count the lost lease
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const LEASE = 0.5;  // session lock_ttl, and the DistributedLock ttl of the paused holder
const SEED = 'seed|i:1;';

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$options = ['lock_ttl' => LEASE, 'lock_wait' => 3.0];
// One pool for both forms (native configured in php.ini; a class-form request installs its own handler).
$pool = st_pool('native', $dsn, $options);
$client = $pool->client();

/** Begin $script with $query and wait until it reports "<ctl>:started"; returns [call, worker pid]. */
function begin_holder(string $label, array $req, string $ctl): array
{
    global $client, $raw;
    $call = $client->begin($req['params']);
    $ok = st_wait(static fn() => $raw->cmd('EXISTS', "$ctl:started") === 1, 5.0, [$call]);
    rl_ok("$label holds its lease", $ok, $call->response->describe());
    return [$call, (int) $raw->cmd('GET', "$ctl:started")];
}

/** Tell a holder to go on and collect its JSON reply. */
function finish_holder(FcgiCall $call, string $ctl): array
{
    global $raw;
    $raw->cmd('SET', "$ctl:go", '1');
    FcgiClient::await([$call], 10.0);
    $j = $call->response->json();
    return is_array($j) ? $j : ['error' => $call->response->describe(), 'warnings' => []];
}

foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);
    $before = fault_pool_counters($pool);

    // A takes the session, then its worker is paused.
    $ctlA = rl_key('ctl-a');
    [$a, $pidA] = begin_holder("$form: A", st_req($form, $dsn, $options, $port, 'hold.php',
        ['sid' => $sid, 'key' => 'a', 'value' => 'A', 'ctl' => $ctlA, 'go_timeout' => 20]), $ctlA);
    rl_ok("$form: A runs in one of the pool's workers", in_array($pidA, $pool->workerPids(), true), (string) $pidA);
    $lockA = $raw->cmd('GET', $lock);
    rl_ok("$form: A's worker is stopped (SIGSTOP)", fault_pause($pidA), (string) fault_proc_state($pidA));

    // Its lease runs out while it is stopped.
    rl_ok("$form: A's lock expired while A is stopped",
        st_wait(static fn() => $raw->cmd('EXISTS', $lock) === 0, 3.0, [$a]) && fault_proc_state($pidA) === 'T');

    // B takes over the session (and holds it until told to write).
    $ctlB = rl_key('ctl-b');
    [$b, $pidB] = begin_holder("$form: B", st_req($form, $dsn, $options, $port, 'hold.php',
        ['sid' => $sid, 'key' => 'b', 'value' => 'B', 'ctl' => $ctlB, 'go_timeout' => 20]), $ctlB);
    $lockB = $raw->cmd('GET', $lock);
    rl_ok("$form: B holds a lock of its own", is_string($lockB) && $lockB !== $lockA, rl_fmt($lockB));

    // A wakes up (its go signal is already there) and tries to write and unlock.
    $raw->cmd('SET', "$ctlA:go", '1');
    rl_ok("$form: A's worker resumed (SIGCONT)", fault_resume($pidA));
    $ja = finish_holder($a, $ctlA);
    rl_same("$form: A had started its session", true, $ja['started'] ?? null);
    rl_ok("$form: A's write was refused with our 'lock expired' warning",
        st_has_warning(st_ours($ja['warnings'] ?? []), 'was not written', 'lock expired'), json_encode($ja['warnings'] ?? $ja));
    rl_same("$form: B's lock is untouched by A's write and unlock", $lockB, $raw->cmd('GET', $lock));
    rl_same("$form: the data is unchanged by A", SEED, $raw->cmd('GET', st_data_key($sid)));

    $jb = finish_holder($b, $ctlB);
    rl_same("$form: B read the data without A's change", ['seed' => 1], $jb['session_before'] ?? null);
    rl_same("$form: B wrote without warnings", [], $jb['warnings'] ?? null);
    rl_same("$form: the newer data (B's) is intact, A's is not there", ['seed' => 1, 'b' => 'B'],
        st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lock));

    $after = fault_pool_counters($pool);
    rl_same("$form: the pool's session_lost counter rose by one", ($before['session_lost'] ?? -1) + 1, $after['session_lost'] ?? null);
}

// --- DistributedLock::synchronized() in a paused worker ---
$key = rl_key('paused-lock');
$rk = rl_lock_key($key);
$store = rl_key('fenced-store');
$lockParams = static fn(array $q) => FcgiClient::params(ST_APP . '/fault_lock.php', $q,
    ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port]);
$before = fault_pool_counters($pool);

$ctl = rl_key('ctl-lock');
[$a, $pidA] = begin_holder('lock: A (in synchronized())', ['params' => $lockParams(['op' => 'hold', 'key' => $key,
    'ttl' => LEASE, 'wait' => 1, 'ctl' => $ctl, 'go_timeout' => 20, 'store' => $store])], $ctl);
$fenceA = (int) $raw->cmd('GET', "$ctl:fence");
rl_ok("lock: A's worker is stopped (SIGSTOP)", fault_pause($pidA));
rl_ok("lock: A's lease expired while A is stopped",
    st_wait(static fn() => $raw->cmd('EXISTS', $rk) === 0, 3.0, [$a]) && fault_proc_state($pidA) === 'T');

// B takes the lock, writes to the fenced store and releases.
$r = $client->request($lockParams(['op' => 'once', 'key' => $key, 'ttl' => 5, 'wait' => 1, 'store' => $store]));
$jb = $r->json() ?? ['error' => $r->describe()];
rl_same('lock: B acquired, held, stored and released', [true, 1], [$jb['ok'] ?? null, $jb['stored'] ?? null]);
rl_ok("lock: B's fencing token is above A's", ($jb['fence'] ?? 0) > $fenceA, json_encode([$fenceA, $jb['fence'] ?? null]));

$raw->cmd('SET', "$ctl:go", '1');
rl_ok("lock: A's worker resumed (SIGCONT)", fault_resume($pidA));
$ja = finish_holder($a, $ctl);
rl_same('lock: synchronized() in A throws LockLostException', 'RedisLease\LockLostException', $ja['exception'] ?? json_encode($ja));
rl_ok('lock: naming the key', str_contains((string) ($ja['message'] ?? ''), $key), (string) ($ja['message'] ?? ''));
rl_same("lock: A's late write was refused by the fenced store", 0, $ja['stored'] ?? null);
rl_same("lock: the store holds B's write", ['fence' => (string) $jb['fence'], 'writer' => 'pid ' . $jb['pid']],
    ['fence' => $raw->cmd('HGET', $store, 'fence'), 'writer' => $raw->cmd('HGET', $store, 'writer')]);
rl_same('lock: the key is free', 0, $raw->cmd('EXISTS', $rk));
$after = fault_pool_counters($pool);
rl_same("lock: the pool's lock_lost counter rose by one", ($before['lock_lost'] ?? -1) + 1, $after['lock_lost'] ?? null);

rl_same('the pool still has its 8 workers', 8, count($pool->workerPids()));
$pool->stop();
echo "done\n";
?>
--EXPECT--
ok: class: A holds its lease
ok: class: A runs in one of the pool's workers
ok: class: A's worker is stopped (SIGSTOP)
ok: class: A's lock expired while A is stopped
ok: class: B holds its lease
ok: class: B holds a lock of its own
ok: class: A's worker resumed (SIGCONT)
ok: class: A had started its session
ok: class: A's write was refused with our 'lock expired' warning
ok: class: B's lock is untouched by A's write and unlock
ok: class: the data is unchanged by A
ok: class: B read the data without A's change
ok: class: B wrote without warnings
ok: class: the newer data (B's) is intact, A's is not there
ok: class: no lock left
ok: class: the pool's session_lost counter rose by one
ok: native: A holds its lease
ok: native: A runs in one of the pool's workers
ok: native: A's worker is stopped (SIGSTOP)
ok: native: A's lock expired while A is stopped
ok: native: B holds its lease
ok: native: B holds a lock of its own
ok: native: A's worker resumed (SIGCONT)
ok: native: A had started its session
ok: native: A's write was refused with our 'lock expired' warning
ok: native: B's lock is untouched by A's write and unlock
ok: native: the data is unchanged by A
ok: native: B read the data without A's change
ok: native: B wrote without warnings
ok: native: the newer data (B's) is intact, A's is not there
ok: native: no lock left
ok: native: the pool's session_lost counter rose by one
ok: lock: A (in synchronized()) holds its lease
ok: lock: A's worker is stopped (SIGSTOP)
ok: lock: A's lease expired while A is stopped
ok: lock: B acquired, held, stored and released
ok: lock: B's fencing token is above A's
ok: lock: A's worker resumed (SIGCONT)
ok: lock: synchronized() in A throws LockLostException
ok: lock: naming the key
ok: lock: A's late write was refused by the fenced store
ok: lock: the store holds B's write
ok: lock: the key is free
ok: lock: the pool's lock_lost counter rose by one
ok: the pool still has its 8 workers
done
