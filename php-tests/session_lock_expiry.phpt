--TEST--
Session lease expiry under php-fpm (class and native forms): a request that outlives its lock (lock_renew off) cannot write, renew or unlock over the next holder
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const TTL = 0.5;            // lock_ttl of every request here
const SEED = 'seed|i:1;';   // session data before the requests

/** Begin hold.php on $sid; wait until it holds the session. Returns [call, ctl prefix]. */
function begin_hold(FpmPool $pool, string $form, string $dsn, int $port, string $sid, string $key, string $value): array
{
    global $raw;
    $ctl = rl_key("ctl-$key");
    $req = st_req($form, $dsn, ['lock_ttl' => TTL, 'lock_renew' => false], $port, 'hold.php',
        ['sid' => $sid, 'key' => $key, 'value' => $value, 'ctl' => $ctl, 'go_timeout' => 10]);
    $call = $pool->client()->begin($req['params']);
    $ok = st_wait(static fn() => $raw->cmd('EXISTS', "$ctl:started") === 1, 5.0, [$call]);
    rl_ok("$form: request " . ($key === '' ? '(no change)' : $key) . ' holds the session', $ok, $call->response->describe());
    return [$call, $ctl];
}

/** Tell a hold.php request to go on; return its JSON reply. */
function finish_hold(FcgiCall $call, string $ctl): array
{
    global $raw;
    $raw->cmd('SET', "$ctl:go", '1');
    FcgiClient::await([$call], 10.0);
    $j = $call->response->json();
    if (!is_array($j)) {
        echo 'FAIL: no JSON reply: ', $call->response->describe(), "\n";
        return [];
    }
    return $j;
}

foreach (ST_FORMS as $form) {
    // Native options through php_admin_value[] this time (the race test uses php.ini).
    $pool = st_pool($form, $dsn, ['lock_ttl' => TTL, 'lock_renew' => false], 'admin');
    $port = $srv['port'];

    // --- 1. A outlives its lease, B takes the lock; A's save must not touch B's session ---
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);
    [$a, $ctlA] = begin_hold($pool, $form, $dsn, $port, $sid, 'a', 'A');
    $lockA = $raw->cmd('GET', $lock);
    rl_ok("$form: lock value is <32 hex token>:0", is_string($lockA) && preg_match('/^[0-9a-f]{32}:0$/', $lockA) === 1, rl_fmt($lockA));
    $pttl = $raw->cmd('PTTL', $lock);
    rl_ok("$form: lock ttl is lock_ttl (0.5 s)", $pttl > 0 && $pttl <= 500, rl_fmt($pttl));
    // A keeps "working"; wait for its lease to run out (bounded).
    $gone = st_wait(static fn() => $raw->cmd('EXISTS', $lock) === 0, 3.0, [$a]);
    rl_ok("$form: A's lock expired while A still runs", $gone && !$a->done, $a->response->describe());

    [$b, $ctlB] = begin_hold($pool, $form, $dsn, $port, $sid, 'b', 'B');
    $lockB = $raw->cmd('GET', $lock);
    rl_ok("$form: B holds a lock of its own", is_string($lockB) && $lockB !== $lockA, rl_fmt($lockB));

    $ja = finish_hold($a, $ctlA);
    rl_same("$form: A had started its session", true, $ja['started'] ?? null);
    rl_same("$form: A saw the go signal", true, $ja['went'] ?? null);
    $wa = $ja['warnings'] ?? [];
    rl_ok("$form: A's write was refused with a 'lock expired' warning",
        st_has_warning(st_ours($wa), 'lock expired'), json_encode($wa));
    rl_same("$form: A's warnings do not contain the whole session id", [], st_leaks($wa, $sid));
    rl_same("$form: B's lock is untouched by A's save", $lockB, $raw->cmd('GET', $lock));
    rl_same("$form: data unchanged by A", SEED, $raw->cmd('GET', st_data_key($sid)));

    $jb = finish_hold($b, $ctlB);
    rl_same("$form: B read the data without A's change", ['seed' => 1], $jb['session_before'] ?? null);
    rl_same("$form: B saved without warnings", [], $jb['warnings'] ?? null);
    rl_same("$form: B's data is stored, A's is not", ['seed' => 1, 'b' => 'B'], st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lock));

    // --- 2. A outlives its lease and nobody else came: its write is still refused ---
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);
    [$a, $ctlA] = begin_hold($pool, $form, $dsn, $port, $sid, 'a', 'A');
    $gone = st_wait(static fn() => $raw->cmd('EXISTS', $lock) === 0, 3.0, [$a]);
    rl_ok("$form: lone A's lock expired while A still runs", $gone && !$a->done, $a->response->describe());
    $ja = finish_hold($a, $ctlA);
    rl_ok("$form: lone A's write refused with 'lock expired'",
        st_has_warning(st_ours($ja['warnings'] ?? []), 'lock expired'), json_encode($ja['warnings'] ?? null));
    rl_same("$form: lone A wrote nothing", SEED, $raw->cmd('GET', st_data_key($sid)));
    rl_same("$form: lone A left no lock", 0, $raw->cmd('EXISTS', $lock));

    // --- 3. Unchanged data (lazy_write -> updateTimestamp) after the lease ran out: no renewal ---
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 100);
    [$a, $ctlA] = begin_hold($pool, $form, $dsn, $port, $sid, '', '');
    $gone = st_wait(static fn() => $raw->cmd('EXISTS', $lock) === 0, 3.0, [$a]);
    rl_ok("$form: unchanged A's lock expired while A still runs", $gone && !$a->done, $a->response->describe());
    $ja = finish_hold($a, $ctlA);
    rl_ok("$form: unchanged A's timestamp update refused with 'lock expired'",
        st_has_warning(st_ours($ja['warnings'] ?? []), 'lock expired'), json_encode($ja['warnings'] ?? null));
    $ttl = $raw->cmd('TTL', st_data_key($sid));
    rl_ok("$form: data ttl not renewed (still <= 100 s, not 1440)", $ttl > 0 && $ttl <= 100, rl_fmt($ttl));

    $pool->stop();
}
echo "done\n";
?>
--EXPECT--
ok: class: request a holds the session
ok: class: lock value is <32 hex token>:0
ok: class: lock ttl is lock_ttl (0.5 s)
ok: class: A's lock expired while A still runs
ok: class: request b holds the session
ok: class: B holds a lock of its own
ok: class: A had started its session
ok: class: A saw the go signal
ok: class: A's write was refused with a 'lock expired' warning
ok: class: A's warnings do not contain the whole session id
ok: class: B's lock is untouched by A's save
ok: class: data unchanged by A
ok: class: B read the data without A's change
ok: class: B saved without warnings
ok: class: B's data is stored, A's is not
ok: class: no lock left
ok: class: request a holds the session
ok: class: lone A's lock expired while A still runs
ok: class: lone A's write refused with 'lock expired'
ok: class: lone A wrote nothing
ok: class: lone A left no lock
ok: class: request (no change) holds the session
ok: class: unchanged A's lock expired while A still runs
ok: class: unchanged A's timestamp update refused with 'lock expired'
ok: class: data ttl not renewed (still <= 100 s, not 1440)
ok: native: request a holds the session
ok: native: lock value is <32 hex token>:0
ok: native: lock ttl is lock_ttl (0.5 s)
ok: native: A's lock expired while A still runs
ok: native: request b holds the session
ok: native: B holds a lock of its own
ok: native: A had started its session
ok: native: A saw the go signal
ok: native: A's write was refused with a 'lock expired' warning
ok: native: A's warnings do not contain the whole session id
ok: native: B's lock is untouched by A's save
ok: native: data unchanged by A
ok: native: B read the data without A's change
ok: native: B saved without warnings
ok: native: B's data is stored, A's is not
ok: native: no lock left
ok: native: request a holds the session
ok: native: lone A's lock expired while A still runs
ok: native: lone A's write refused with 'lock expired'
ok: native: lone A wrote nothing
ok: native: lone A left no lock
ok: native: request (no change) holds the session
ok: native: unchanged A's lock expired while A still runs
ok: native: unchanged A's timestamp update refused with 'lock expired'
ok: native: data ttl not renewed (still <= 100 s, not 1440)
done
