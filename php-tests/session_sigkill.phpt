--TEST--
Session lock of a php-fpm worker killed with SIGKILL (class and native forms): the next request gets the session when the lease runs out, not later
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const TTL = 1.0;
const SEED = 'seed|i:1;';

foreach (ST_FORMS as $form) {
    $options = ['lock_ttl' => TTL];
    $pool = st_pool($form, $dsn, $options);
    $client = $pool->client();
    $sid = st_sid();
    $lock = st_lock_key($sid);
    $raw->cmd('SET', st_data_key($sid), SEED, 'EX', 1440);

    // A: holds the session and "works" until killed (it never gets a go signal).
    $ctl = rl_key('ctl-victim');
    $a = $client->begin(st_req($form, $dsn, $options, $srv['port'], 'hold.php',
        ['sid' => $sid, 'key' => 'a', 'value' => 'A', 'ctl' => $ctl, 'go_timeout' => 20])['params']);
    $held = st_wait(static fn() => $raw->cmd('EXISTS', "$ctl:started") === 1, 5.0, [$a]);
    rl_ok("$form: A holds the session", $held, $a->response->describe());
    $pid = (int) $raw->cmd('GET', "$ctl:started");
    rl_ok("$form: A runs in one of the pool's workers", in_array($pid, $pool->workerPids(), true),
        "pid $pid, workers " . json_encode($pool->workerPids()));
    $lockValue = $raw->cmd('GET', $lock);

    $pttl = $raw->cmd('PTTL', $lock);
    rl_kill_pid($pid, 'KILL');
    $tKill = microtime(true);
    rl_ok("$form: A's lock has a lease of at most 1 s", $pttl > 0 && $pttl <= 1000, rl_fmt($pttl));

    // The worker dies: its connection closes without FCGI_END_REQUEST.
    FcgiClient::await([$a], 5.0);
    rl_same("$form: A's request was cut off", 'connection closed before FCGI_END_REQUEST', $a->response->error);
    rl_same("$form: the killed worker did not free the lock", $lockValue, $raw->cmd('GET', $lock));

    // B: an ordinary request on the same session, sent right after the kill.
    $r = $client->request(st_req($form, $dsn, $options, 0, 'add_key.php', ['sid' => $sid, 'key' => 'b'])['params'], '', 10.0);
    $j = $r->json() ?? [];
    rl_same("$form: B's session_start() succeeds", true, $j['started'] ?? $r->describe());
    rl_same("$form: B without warnings", [], $j['warnings'] ?? null);
    $el = ($j['t_started'] ?? INF) - $tKill;
    rl_ok("$form: B got the lock not before A's lease ran out", $el >= $pttl / 1000 - 0.1,
        sprintf('%.3f s after the kill; remaining lease was %d ms', $el, $pttl));
    rl_ok("$form: B got the lock within ttl + 0.7 s of the kill", $el <= TTL + 0.7,
        sprintf('%.3f s after the kill', $el));
    printf("info: %s: B locked the session %.3f s after the kill (lease left: %d ms)\n", $form, $el, $pttl);
    rl_same("$form: B saw only the seed (A never wrote)", 1, $j['count_before'] ?? null);
    rl_same("$form: data is the seed plus B's key", ['seed' => 1, 'b' => 1], st_decode($raw->cmd('GET', st_data_key($sid))));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lock));

    // php-fpm noticed the kill and replaced the worker.
    rl_ok("$form: fpm logged the worker's SIGKILL",
        (bool) rl_wait_until(static fn() => str_contains($pool->logs(), "child $pid exited on signal 9"), 5.0),
        $pool->logs());
    rl_ok("$form: the pool is back to 8 workers, without the killed one",
        $pool->awaitWorkers(5.0) && !in_array($pid, $pool->workerPids(), true), json_encode($pool->workerPids()));
    $pool->stop();
}
echo "done\n";
?>
--EXPECTF--
ok: class: A holds the session
ok: class: A runs in one of the pool's workers
ok: class: A's lock has a lease of at most 1 s
ok: class: A's request was cut off
ok: class: the killed worker did not free the lock
ok: class: B's session_start() succeeds
ok: class: B without warnings
ok: class: B got the lock not before A's lease ran out
ok: class: B got the lock within ttl + 0.7 s of the kill
info: class: B locked the session %f s after the kill (lease left: %d ms)
ok: class: B saw only the seed (A never wrote)
ok: class: data is the seed plus B's key
ok: class: no lock left
ok: class: fpm logged the worker's SIGKILL
ok: class: the pool is back to 8 workers, without the killed one
ok: native: A holds the session
ok: native: A runs in one of the pool's workers
ok: native: A's lock has a lease of at most 1 s
ok: native: A's request was cut off
ok: native: the killed worker did not free the lock
ok: native: B's session_start() succeeds
ok: native: B without warnings
ok: native: B got the lock not before A's lease ran out
ok: native: B got the lock within ttl + 0.7 s of the kill
info: native: B locked the session %f s after the kill (lease left: %d ms)
ok: native: B saw only the seed (A never wrote)
ok: native: data is the seed plus B's key
ok: native: no lock left
ok: native: fpm logged the worker's SIGKILL
ok: native: the pool is back to 8 workers, without the killed one
done
