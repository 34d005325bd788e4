--TEST--
Operators, for real: Prometheus (Debian's) scrapes a php-fpm pool's /metrics under a short load of locks, permits and sessions; `promtool check metrics` passes our exposition; the alert rules load and `promtool test rules` passes their unit tests (every alert fires and stays quiet); every PromQL expression of the Grafana dashboard returns data; `redis-lease top` and `show` against the pool under contention print the contended key first, with its waiters in order
--SKIPIF--
<?php
if (trim((string) shell_exec('command -v prometheus')) === '' || trim((string) shell_exec('command -v promtool')) === '') {
    die('skip needs prometheus and promtool (Debian package prometheus; scripts/install-deps.sh installs it)');
}
?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
$ops = __DIR__ . '/../ops';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$pool = st_pool('class', $dsn, [], 'ini', [], 12);
$client = $pool->client();
$server = st_class_server($dsn, []);
$load = fn(array $query) => ['params' => FcgiClient::params(ST_APP . '/ops_load.php', $query, $server)];

// --- /metrics over HTTP: a small gateway in front of the pool ---
$gwPort = rl_free_port();
$gw = rl_spawn_php('$argv = ' . rl_export(['gw', (string) $gwPort, $pool->address, ST_APP . '/prometheus.php', json_encode($server)])
    . '; require ' . rl_export(__DIR__ . '/../testing/http_gateway.php') . ';');
rl_ok('the gateway listens', $gw->expectLine('listening') !== null);
$scrape = fn() => @file_get_contents("http://127.0.0.1:$gwPort/metrics");

// --- Prometheus, scraping every second, with our rules ---
$dir = rl_tempfile('-prom');
unlink($dir);
mkdir($dir);
$promPort = rl_free_port();
file_put_contents("$dir/prometheus.yml", "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
    . "rule_files: [" . json_encode(realpath("$ops/prometheus/redis_lease_rules.yml"), JSON_UNESCAPED_SLASHES) . "]\n"
    . "scrape_configs:\n  - job_name: php\n    static_configs: [{targets: ['127.0.0.1:$gwPort']}]\n");
$setpriv = trim((string) shell_exec('command -v setpriv'));
$prom = proc_open(array_merge($setpriv !== '' ? [$setpriv, '--pdeathsig', 'KILL', '--'] : [], ['prometheus',
    "--config.file=$dir/prometheus.yml", "--storage.tsdb.path=$dir/data", "--web.listen-address=127.0.0.1:$promPort"]),
    [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$dir/log", 'a'], 2 => ['file', "$dir/log", 'a']], $pipes);
rl_on_cleanup(function () use ($prom, $dir): void {
    proc_terminate($prom, 9);
    proc_close($prom);
    exec('rm -rf ' . escapeshellarg($dir));
});
$api = function (string $path, array $query = []) use ($promPort): ?array {
    $body = @file_get_contents("http://127.0.0.1:$promPort/api/v1/$path" . ($query ? '?' . http_build_query($query) : ''));
    return $body === false ? null : json_decode($body, true);
};
rl_ok('Prometheus is up', rl_wait_until(fn() => ($api('status/buildinfo')['status'] ?? '') === 'success', 30.0), (string) @file_get_contents("$dir/log"));

// --- load: contended locks, permits and sessions, for a few seconds of scrapes ---
$ok = 0;
$all = 0;
$t0 = microtime(true);
for ($round = 0; microtime(true) - $t0 < 6.0; $round++) {
    $reqs = [];
    for ($i = 0; $i < 8; $i++) {
        $reqs[] = $load(['wait' => '0.05', 'sid' => 'opsload' . ($i % 3)]);
    }
    foreach ($client->multi($reqs) as $r) {
        $all++;
        $ok += (int) ($r->ok() && $r->status === 200 && $r->body === "ok\n");
    }
}
rl_same('every load request answered 200', $all, $ok);
$up = fn() => $api('query', ['query' => 'count_over_time(redis_lease_lock_acquired_total{job="php"}[1m])'])['data']['result'][0]['value'][1] ?? 0;
rl_ok('Prometheus scraped the pool several times', rl_wait_until(fn() => (int) $up() >= 4, 20.0), (string) $up());
$targets = $api('targets')['data']['activeTargets'] ?? [];
rl_same('the target is healthy', ['up'], array_column($targets, 'health'));

// --- our exposition passes promtool's checks ---
$text = $scrape();
rl_ok('the exposition has our counters and histograms', str_contains((string) $text, '# TYPE redis_lease_lock_wait_seconds histogram'));
$p = proc_open(['promtool', 'check', 'metrics'], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pp);
fwrite($pp[0], (string) $text);
fclose($pp[0]);
$out = stream_get_contents($pp[1]) . stream_get_contents($pp[2]);
rl_same('promtool check metrics: no problem', [0, ''], [proc_close($p), trim($out)]);

// --- the rules: checked, unit-tested, loaded ---
exec('promtool check rules ' . escapeshellarg("$ops/prometheus/redis_lease_rules.yml") . ' 2>&1', $out1, $s1);
rl_ok('promtool check rules', $s1 === 0, implode("\n", $out1));
exec('cd ' . escapeshellarg("$ops/prometheus") . ' && promtool test rules redis_lease_rules_test.yml 2>&1', $out2, $s2);
rl_ok('promtool test rules: every alert fires on its history and stays quiet on a calm one', $s2 === 0 && str_contains(implode("\n", $out2), 'SUCCESS'), implode("\n", $out2));
$alerts = [];
foreach ($api('rules')['data']['groups'] ?? [] as $g) {
    foreach ($g['rules'] as $r) {
        $alerts[$r['name']] = $r['health'];
    }
}
preg_match_all('/- alert: (\w+)/', (string) file_get_contents("$ops/prometheus/redis_lease_rules.yml"), $m);
rl_same('Prometheus evaluates every alert without error', array_fill_keys($m[1], 'ok'), $alerts);
$tested = (string) file_get_contents("$ops/prometheus/redis_lease_rules_test.yml");
rl_same('every alert has a unit test', [], array_values(array_filter($m[1], fn($a) => !str_contains($tested, "alertname: $a"))));

// --- every expression of the dashboard returns data ---
$dash = json_decode((string) file_get_contents("$ops/grafana/redis_lease_dashboard.json"), true);
$empty = [];
$n = 0;
foreach ($dash['panels'] as $panel) {
    foreach ($panel['targets'] as $t) {
        $n++;
        $expr = strtr($t['expr'], ['$__rate_interval' => '1m', '$job' => '.*']);
        $res = $api('query', ['query' => $expr]);
        if (($res['status'] ?? '') !== 'success' || ($res['data']['result'] ?? []) === []) {
            $empty[] = "{$panel['title']}: $expr -> " . json_encode($res);
        }
    }
}
rl_ok("the dashboard's $n expressions all return data", $n >= 20 && $empty === [], implode("\n", $empty));
$rate = $api('query', ['query' => strtr($dash['panels'][4]['targets'][0]['expr'], ['$__rate_interval' => '1m', '$job' => '.*'])]);
rl_ok('... with the load in them (locks acquired per second > 0)', (float) ($rate['data']['result'][0]['value'][1] ?? 0) > 0, json_encode($rate));
$var = $api('label/job/values', ['match[]' => 'redis_lease_lock_acquired_total']);
rl_same("the dashboard's job variable finds the pool", ['php'], $var['data'] ?? null);

// --- redis-lease top and show against the pool under contention ---
$holder = new DistributedLock('ops:hot', 30.0, $dsn);
rl_ok('the test holds the hot lock', $holder->acquire(5.0));
$calls = [];
for ($i = 0; $i < 3; $i++) {
    $calls[] = $client->begin($load(['wait' => '20', 'sid' => "opswait$i"])['params']);
    rl_ok("request $i queues for it", rl_wait_until(function () use ($calls, $raw, $i) {
        FcgiClient::pump($calls, 0.01);
        return (int) $raw->cmd('ZCARD', 'lock:{ops:hot}:waiters') === $i + 1;
    }, 10.0));
}
$cli = rl_php_cmd() . ' ' . escapeshellarg(__DIR__ . '/../bin/redis-lease') . ' --dsn=' . escapeshellarg($dsn);
$top = (string) shell_exec("$cli top --count=1 2>&1");
$rows = array_values(array_filter(explode("\n", $top), fn($l) => str_starts_with($l, 'lock:') || str_starts_with($l, '{')));
rl_ok('redis-lease top: the contended key first, its 3 waiters', (bool) preg_match('/^lock:\{ops:hot\}\s+lock\s+1 write\s+3\s/', $rows[0] ?? ''), $top);
$show = json_decode((string) shell_exec("$cli --json show ops:hot"), true);
rl_same('redis-lease show: the holder, then 3 writers in queue order', ['write', ['write', 'write', 'write']],
    [$show['holders'][0]['mode'] ?? null, array_column($show['waiters'] ?? [], 'mode')]);
rl_ok('redis-lease show: the first waiter has waited longest', $show['waiters'][0]['waited'] >= $show['waiters'][2]['waited'], json_encode(array_column($show['waiters'], 'waited')));
rl_ok('the holder lets go', $holder->release());
rl_ok('the queued requests finish', FcgiClient::await($calls, 20.0));
rl_same('... each with its turn', [200, 200, 200], array_map(fn($c) => $c->response->status, $calls));
echo "done\n";
?>
--EXPECTF--
ok: the gateway listens
ok: Prometheus is up
ok: every load request answered 200
ok: Prometheus scraped the pool several times
ok: the target is healthy
ok: the exposition has our counters and histograms
ok: promtool check metrics: no problem
ok: promtool check rules
ok: promtool test rules: every alert fires on its history and stays quiet on a calm one
ok: Prometheus evaluates every alert without error
ok: every alert has a unit test
ok: the dashboard's %d expressions all return data
ok: ... with the load in them (locks acquired per second > 0)
ok: the dashboard's job variable finds the pool
ok: the test holds the hot lock
ok: request 0 queues for it
ok: request 1 queues for it
ok: request 2 queues for it
ok: redis-lease top: the contended key first, its 3 waiters
ok: redis-lease show: the holder, then 3 writers in queue order
ok: redis-lease show: the first waiter has waited longest
ok: the holder lets go
ok: the queued requests finish
ok: ... each with its turn
done
