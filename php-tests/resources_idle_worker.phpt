--TEST--
Resources: a php-fpm worker that used 16 DSNs with auto-renewed locks runs at most one background thread, and once idle (redis_lease.idle_timeout) is back to one thread and to the descriptors it had before
--CONFLICTS--
fpm
--FILE--
<?php
require __DIR__ . '/../testing/fpm_pool.php';

$srv = rl_start_redis(['--databases', '16']);
$pool = FpmPool::start(['max_children' => 1, 'ini' => ['redis_lease.idle_timeout' => '1']]);
$client = $pool->client();
$extra = ['RL_DSN' => "redis://127.0.0.1:{$srv['port']}"];
$app = __DIR__ . '/fpm-app';

$pid = $pool->workerPids()[0];
$count = fn(string $what) => count(glob("/proc/$pid/$what/*"));
// A first request that loads everything PHP itself opens lazily.
$client->request(FcgiClient::params("$app/noop.php", [], $extra));
[$threads0, $fds0] = [$count('task'), $count('fd')];

$busy = ['threads' => 0, 'fds' => 0];
$watch = function () use (&$busy, $count): void {
    $busy['threads'] = max($busy['threads'], $count('task'));
    $busy['fds'] = max($busy['fds'], $count('fd'));
};
$r = $client->request(FcgiClient::params("$app/sixteen_dsns.php", [], $extra), 20.0);
$watch();
$j = $r->json();
rl_ok('16 auto-renewed locks taken and released', is_array($j) && $j['ok'] === true && $j['pid'] === $pid, $r->describe());
rl_ok('at most one background thread beside the request thread', $busy['threads'] <= $threads0 + 1, "$threads0 -> {$busy['threads']}");
rl_ok('the connections stay open between requests', $count('fd') >= $fds0 + 16, "$fds0 -> {$count('fd')}");
// Idle: the connections close after idle_timeout, then the thread ends.
$back = rl_wait_until(fn() => $count('task') === $threads0 && $count('fd') <= $fds0, 10.0, 0.05);
rl_ok('idle: back to the threads and descriptors it had before (no more)', $back, "threads {$count('task')} (was $threads0), fds {$count('fd')} (was $fds0)");
// And the worker still works: it reconnects.
$r = $client->request(FcgiClient::params("$app/sixteen_dsns.php", [], $extra), 20.0);
rl_ok('it reconnects for the next request', ($r->json()['ok'] ?? false) === true, $r->describe());
echo "done\n";
?>
--EXPECT--
ok: 16 auto-renewed locks taken and released
ok: at most one background thread beside the request thread
ok: the connections stay open between requests
ok: idle: back to the threads and descriptors it had before (no more)
ok: it reconnects for the next request
done
