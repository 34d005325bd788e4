--TEST--
INI: defaults of redis_lease.*; redis_lease.dsn is used when $dsn is null; redis_lease.lock_prefix prefixes all keys
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);

rl_same('default redis_lease.dsn', 'redis://127.0.0.1:6379', ini_get('redis_lease.dsn'));
rl_same('default redis_lease.lock_prefix', 'lock:', ini_get('redis_lease.lock_prefix'));
rl_same('default redis_lease.connect_timeout is 1 s', 1.0, (float) ini_get('redis_lease.connect_timeout'));
rl_same('default redis_lease.read_timeout is 2 s', 2.0, (float) ini_get('redis_lease.read_timeout'));

$k = rl_key('ini');
$child = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ');   // $dsn null -> INI dsn
echo $l->acquire() ? "acquired\n" : "not acquired\n";
echo ini_get("redis_lease.lock_prefix"), "\n";
echo trim((string) fgets(STDIN)), "\n";              // parent looked at the keys
$w = new DistributedLock(' . rl_export($k) . ', 5.0, null);  // explicit null
echo $w->acquire(0.2) ? "contender acquired\n" : "contender refused\n";
echo $l->release() ? "released\n" : "not released\n";
', ['redis_lease.dsn' => $srv['dsn'], 'redis_lease.lock_prefix' => 'myapp:locks:']);

rl_same('child acquired through the INI dsn', 'acquired', $child->readLine(10.0));
rl_same('child sees the INI prefix', 'myapp:locks:', $child->readLine(10.0));
rl_same('lock key uses the INI prefix: myapp:locks:{K}', 1, $raw->cmd('EXISTS', 'myapp:locks:{' . $k . '}'));
rl_same('no key with the default prefix', 0, $raw->cmd('EXISTS', 'lock:{' . $k . '}'));
$keys = $raw->cmd('KEYS', '*');
$stray = array_filter($keys, fn($x) => !str_starts_with($x, 'myapp:locks:{' . $k . '}'));
rl_ok('every key the extension created has the prefix', $stray === [], json_encode(array_values($stray)));
$child->send('checked');
rl_same('child continues', 'checked', $child->readLine(10.0));
rl_same('contender with explicit null dsn refused', 'contender refused', $child->readLine(10.0));
rl_same('child released', 'released', $child->readLine(10.0));
rl_same('child exit status', 0, $child->wait(10.0));
rl_same('prefixed key gone', 0, $raw->cmd('EXISTS', 'myapp:locks:{' . $k . '}'));
rl_same('wake list key uses the prefix too (if it exists at all)', 0, count(array_filter($raw->cmd('KEYS', '*'),
    fn($x) => !str_starts_with($x, 'myapp:locks:'))));

echo "done\n";
?>
--EXPECT--
ok: default redis_lease.dsn
ok: default redis_lease.lock_prefix
ok: default redis_lease.connect_timeout is 1 s
ok: default redis_lease.read_timeout is 2 s
ok: child acquired through the INI dsn
ok: child sees the INI prefix
ok: lock key uses the INI prefix: myapp:locks:{K}
ok: no key with the default prefix
ok: every key the extension created has the prefix
ok: child continues
ok: contender with explicit null dsn refused
ok: child released
ok: child exit status
ok: prefixed key gone
ok: wake list key uses the prefix too (if it exists at all)
done
