--TEST--
DistributedLock::server(): which Redis a DSN names, the same for every spelling of it (timeouts, WAIT, prefix and other per-call options, credentials, the phpredis form), different for another host, port, database or TLS, never with a secret, null for the ini setting redis_lease.dsn; nothing is asked of Redis; a malformed DSN is a ValueError that does not echo it
--INI--
redis_lease.dsn=redis://127.0.0.1:6390/3
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$same = [
    'redis://127.0.0.1:6390/3',
    'redis://:Secret-4711@127.0.0.1:6390/3?timeout=0.5&read_timeout=2&wait_replicas=1&wait_timeout=100',
    'redis://app:Secret-4711@127.0.0.1:6390/3?functions=0',
    'tcp://127.0.0.1:6390?database=3&auth=Secret-4711&prefix=PHPREDIS_SESSION:',
];
$ids = array_map(fn (string $dsn) => DistributedLock::server($dsn), $same);
rl_same('four spellings of one Redis: one answer', 1, count(array_unique($ids)));
rl_ok('... naming it', str_contains($ids[0], '127.0.0.1:6390') && str_ends_with($ids[0], '/3'), $ids[0]);
rl_ok('... never the password', !str_contains(implode(' ', $ids), 'Secret'), implode(' | ', $ids));
rl_same('null: the ini setting redis_lease.dsn', $ids[0], DistributedLock::server());
$others = [
    'redis://127.0.0.1:6390/4',
    'redis://127.0.0.1:6391/3',
    'redis://127.0.0.2:6390/3',
    'rediss://127.0.0.1:6390/3',
];
$otherIds = array_map(fn (string $dsn) => DistributedLock::server($dsn), $others);
rl_same('another database, port, host or TLS: another answer each', 5, count(array_unique([...$otherIds, $ids[0]])));
$e = rl_throws('a malformed DSN: ValueError', ValueError::class, fn () => DistributedLock::server('redis://:Secret-4711@[::1'));
rl_ok('... not echoing it', $e !== null && !str_contains($e->getMessage(), 'Secret'), $e?->getMessage() ?? '');
echo "done\n";
?>
--EXPECT--
ok: four spellings of one Redis: one answer
ok: ... naming it
ok: ... never the password
ok: null: the ini setting redis_lease.dsn
ok: another database, port, host or TLS: another answer each
ok: a malformed DSN: ValueError
ok: ... not echoing it
done
