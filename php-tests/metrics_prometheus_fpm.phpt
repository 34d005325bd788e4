--TEST--
Metrics: locks taken in several php-fpm workers all show up in one Prometheus scrape of any worker
--CONFLICTS--
fpm
--FILE--
<?php
require __DIR__ . '/../testing/fpm_pool.php';

$srv = rl_start_redis();
$pool = FpmPool::start(['max_children' => 4]);
$client = $pool->client();
$extra = ['RL_DSN' => $srv['dsn']];
$app = __DIR__ . '/fpm-app';

// 40 lock requests, 8 at a time, so that several workers serve them.
$pids = [];
$mine = [];
for ($batch = 0; $batch < 5; $batch++) {
    $reqs = [];
    for ($i = 0; $i < 8; $i++) {
        $n = $batch * 8 + $i;
        $reqs[$n] = ['params' => FcgiClient::params("$app/lock_once.php", ['n' => $n], $extra)];
    }
    foreach ($client->multi($reqs, 20.0) as $n => $r) {
        $j = $r->json();
        if (!is_array($j) || $j['ok'] !== true) {
            echo "FAIL: request $n: ", $r->describe(), "\n";
            continue;
        }
        $pids[$j['pid']] = true;
        $mine[$j['pid']] = max($mine[$j['pid']] ?? 0, $j['mine']);
    }
}
rl_ok('several workers served the locks', count($pids) >= 2, json_encode(array_keys($pids)));
rl_ok('no single worker took all 40', max($mine) < 40, json_encode($mine));

$scrape = $client->request(FcgiClient::params("$app/prometheus.php", [], $extra));
rl_same('scrape answers 200', true, $scrape->ok());
rl_ok('scrape content type is Prometheus text', str_starts_with((string) $scrape->header('Content-Type'), 'text/plain; version=0.0.4'), (string) $scrape->header('Content-Type'));
$body = $scrape->body;
preg_match('/^redis_lease_lock_acquired_total (\d+)$/m', $body, $m);
rl_same('one scrape counts the locks of every worker', 40, (int) ($m[1] ?? -1));
preg_match('/^redis_lease_lock_released_total (\d+)$/m', $body, $m);
rl_same('and their releases', 40, (int) ($m[1] ?? -1));
preg_match('/^redis_lease_lock_hold_seconds_count (\d+)$/m', $body, $m);
rl_same('the hold-time histogram counts every release', 40, (int) ($m[1] ?? -1));
rl_ok('every sample line is "name{labels} value" under a # TYPE',
    (bool) preg_match('/\A((# (HELP|TYPE) [^\n]+|redis_lease_[a-z_]+(\{le="[^"]+"\})? [0-9.e+-]+)\n)+\z/', $body),
    substr($body, 0, 200));
rl_ok('no password or session id material in the scrape', !str_contains($body, 'PHPREDIS_SESSION'));
echo "done\n";
?>
--EXPECT--
ok: several workers served the locks
ok: no single worker took all 40
ok: scrape answers 200
ok: scrape content type is Prometheus text
ok: one scrape counts the locks of every worker
ok: and their releases
ok: the hold-time histogram counts every release
ok: every sample line is "name{labels} value" under a # TYPE
ok: no password or session id material in the scrape
done
