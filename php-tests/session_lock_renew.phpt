--TEST--
Session lock renewal under php-fpm (class and native forms, lock_renew on, lock_ttl 1 s): a request that runs 4x lock_ttl keeps its session locked (a concurrent request's lock wait runs out) and its write lands; a worker killed mid-request frees the session within lock_ttl; with lock_renew off the same long request loses its lock and its write is refused
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const TTL = 1.0;
const WAIT = 2.0;
const WORK = 4.0;           // the long request's work: 4 lock ttls
const SEED = 'seed|i:1;';

/** Begin hold.php on $sid; wait until it holds the session. Returns [call, ctl prefix, worker pid]. */
function begin_hold(FpmPool $pool, string $form, array $options, string $sid, string $key): array
{
    global $raw, $dsn, $srv;
    $ctl = rl_key("ctl-$key");
    $req = st_req($form, $dsn, $options, $srv['port'], 'hold.php',
        ['sid' => $sid, 'key' => $key, 'value' => strtoupper($key), 'ctl' => $ctl, 'go_timeout' => 30]);
    $call = $pool->client()->begin($req['params']);
    $ok = st_wait(static fn() => $raw->cmd('EXISTS', "$ctl:started") === 1, 5.0, [$call]);
    rl_ok("$form: request $key holds the session", $ok, $call->response->describe());
    return [$call, $ctl, (int) $raw->cmd('GET', "$ctl:started")];
}

function finish_hold(FcgiCall $call, string $ctl): array
{
    global $raw;
    $raw->cmd('SET', "$ctl:go", '1');
    FcgiClient::await([$call], 10.0);
    return $call->response->json() ?? ['reply' => $call->response->describe()];
}

function add_key(FpmPool $pool, string $form, array $options, string $sid, string $key): array
{
    global $dsn;
    $r = $pool->client()->request(st_req($form, $dsn, $options, 0, 'add_key.php', ['sid' => $sid, 'key' => $key])['params'], '', 15.0);
    return $r->json() ?? ['reply' => $r->describe()];
}

foreach (ST_FORMS as $form) {
    $options = ['lock_ttl' => TTL, 'lock_wait' => WAIT];
    $pool = st_pool($form, $dsn, $options);

    // --- A runs 4 ttls; B, sent meanwhile, cannot take the session ---
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);
    [$a, $ctl] = begin_hold($pool, $form, $options, $sid, 'a');
    $token = $raw->cmd('GET', st_lock_key($sid));
    $t0 = microtime(true);
    $b = add_key($pool, $form, $options, $sid, 'b');
    rl_same("$form: B's lock wait (2 s, twice the lock ttl) ran out: A still held it", false, $b['started'] ?? null);
    rl_ok("$form: ... with a 'lock wait' warning", st_has_warning(st_ours($b['warnings'] ?? []), 'lock wait'), json_encode($b['warnings'] ?? null));
    rl_same("$form: A's lock is the same lease (renewed, never re-taken)", $token, $raw->cmd('GET', st_lock_key($sid)));
    $pttl = $raw->cmd('PTTL', st_lock_key($sid));
    rl_ok("$form: ... and still has most of a ttl left", $pttl > 500 && $pttl <= 1000, rl_fmt($pttl));
    usleep((int) max(0, (WORK - (microtime(true) - $t0)) * 1e6)); // the rest of A's work
    $j = finish_hold($a, $ctl);
    rl_same("$form: A's write after 4 ttls succeeded, without warnings", [true, []], [$j['write_closed'] ?? null, $j['warnings'] ?? null]);
    rl_same("$form: A's data is stored", ['seed' => 1, 'a' => 'A'], st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', st_lock_key($sid)));

    // --- D is killed mid-request: E gets the session within lock_ttl ---
    $sid = st_sid();
    [$d, $ctl, $pid] = begin_hold($pool, $form, $options, $sid, 'd');
    // Its lease runs down past two thirds, then is renewed to a whole ttl again.
    $renewed = rl_wait_until(fn() => $raw->cmd('PTTL', st_lock_key($sid)) < 700, 2.0, 0.005)
        && rl_wait_until(fn() => $raw->cmd('PTTL', st_lock_key($sid)) > 900, 2.0, 0.005);
    rl_ok("$form: D's lease is renewed", $renewed);
    rl_kill_pid($pid, 'KILL');
    $tKill = microtime(true);
    $e = add_key($pool, $form, $options, $sid, 'e');
    $el = ($e['t_started'] ?? INF) - $tKill;
    rl_same("$form: E gets the session", true, $e['started'] ?? null);
    rl_ok("$form: ... within lock_ttl of the kill (renewals died with the worker)", $el <= TTL + 0.2, sprintf('%.3f s', $el));
    printf("info: %s: the session of a killed worker was free %.3f s after the kill (lock_ttl %.1f s)\n", $form, $el, TTL);
    FcgiClient::await([$d], 5.0);
    $pool->stop();
}

// --- The same long request with lock_renew off (class form): its lock ends, its write is refused ---
$options = ['lock_ttl' => TTL, 'lock_wait' => WAIT, 'lock_renew' => false];
$pool = st_pool('class', $dsn, $options);
$sid = st_sid();
$raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);
[$a, $ctl] = begin_hold($pool, 'class', $options, $sid, 'a');
$t0 = microtime(true);
$b = add_key($pool, 'class', $options, $sid, 'b');
rl_same('lock_renew off: B takes the session once A\'s lease runs out', true, $b['started'] ?? null);
usleep((int) max(0, (WORK - (microtime(true) - $t0)) * 1e6));
$j = finish_hold($a, $ctl);
$wa = array_merge($j['warnings'] ?? [], $j['write_warnings'] ?? []);
rl_ok('lock_renew off: A\'s write is refused (\'lock expired\' warning)', st_has_warning(st_ours($wa), 'lock expired'), json_encode($wa));
rl_same('lock_renew off: only B\'s key is stored', ['seed' => 1, 'b' => 1], st_decode($raw->cmd('GET', st_data_key($sid))));
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: class: request a holds the session
ok: class: B's lock wait (2 s, twice the lock ttl) ran out: A still held it
ok: class: ... with a 'lock wait' warning
ok: class: A's lock is the same lease (renewed, never re-taken)
ok: class: ... and still has most of a ttl left
ok: class: A's write after 4 ttls succeeded, without warnings
ok: class: A's data is stored
ok: class: no lock left
ok: class: request d holds the session
ok: class: D's lease is renewed
ok: class: E gets the session
ok: class: ... within lock_ttl of the kill (renewals died with the worker)
info: class: the session of a killed worker was free %f s after the kill (lock_ttl %f s)
ok: native: request a holds the session
ok: native: B's lock wait (2 s, twice the lock ttl) ran out: A still held it
ok: native: ... with a 'lock wait' warning
ok: native: A's lock is the same lease (renewed, never re-taken)
ok: native: ... and still has most of a ttl left
ok: native: A's write after 4 ttls succeeded, without warnings
ok: native: A's data is stored
ok: native: no lock left
ok: native: request d holds the session
ok: native: D's lease is renewed
ok: native: E gets the session
ok: native: ... within lock_ttl of the kill (renewals died with the worker)
info: native: the session of a killed worker was free %f s after the kill (lock_ttl %f s)
ok: class: request a holds the session
ok: lock_renew off: B takes the session once A's lease runs out
ok: lock_renew off: A's write is refused ('lock expired' warning)
ok: lock_renew off: only B's key is stored
done
