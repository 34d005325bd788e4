--TEST--
DistributedLock keys: UTF-8, spaces, braces, colons, newlines and the 1024-byte maximum map to "lock:{K}" exactly
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

foreach ([
    'plain' => 'orders',
    'utf-8' => 'Bestellung-äöü-заказ-注文-🔒',
    'spaces' => 'my lock name',
    'braces' => '{user:1}}{',
    'colons' => 'a:b:c',
    'newline' => "line1\nline2",
    'digits only' => '12345',
    '1024 bytes' => str_repeat('x', 1024),
    '1024 bytes of 2-byte chars' => str_repeat('é', 512),
] as $label => $key) {
    $l = new DistributedLock($key, 5.0, $dsn);
    rl_same("$label: getKey() returns the key as given", $key, $l->getKey());
    $got = $l->acquire();
    rl_same("$label: acquire", true, $got);
    rl_same("$label: Redis key is lock:{K}", 1, $raw->cmd('EXISTS', rl_lock_key($key)));
    $other = new DistributedLock($key, 5.0, $dsn);
    rl_same("$label: contender refused", false, $other->acquire());
    rl_same("$label: release", true, $l->release());
    rl_same("$label: key gone", 0, $raw->cmd('EXISTS', rl_lock_key($key)));
    unset($l, $other);
}
// Similar keys are different locks.
$a = new DistributedLock('same', 5.0, $dsn);
$b = new DistributedLock('Same', 5.0, $dsn);
$c = new DistributedLock('same ', 5.0, $dsn);
rl_same('keys differing in case / trailing space are independent', [true, true, true], [$a->acquire(), $b->acquire(), $c->acquire()]);
$a->release();
$b->release();
$c->release();
unset($a, $b, $c);
echo "done\n";
?>
--EXPECT--
ok: plain: getKey() returns the key as given
ok: plain: acquire
ok: plain: Redis key is lock:{K}
ok: plain: contender refused
ok: plain: release
ok: plain: key gone
ok: utf-8: getKey() returns the key as given
ok: utf-8: acquire
ok: utf-8: Redis key is lock:{K}
ok: utf-8: contender refused
ok: utf-8: release
ok: utf-8: key gone
ok: spaces: getKey() returns the key as given
ok: spaces: acquire
ok: spaces: Redis key is lock:{K}
ok: spaces: contender refused
ok: spaces: release
ok: spaces: key gone
ok: braces: getKey() returns the key as given
ok: braces: acquire
ok: braces: Redis key is lock:{K}
ok: braces: contender refused
ok: braces: release
ok: braces: key gone
ok: colons: getKey() returns the key as given
ok: colons: acquire
ok: colons: Redis key is lock:{K}
ok: colons: contender refused
ok: colons: release
ok: colons: key gone
ok: newline: getKey() returns the key as given
ok: newline: acquire
ok: newline: Redis key is lock:{K}
ok: newline: contender refused
ok: newline: release
ok: newline: key gone
ok: digits only: getKey() returns the key as given
ok: digits only: acquire
ok: digits only: Redis key is lock:{K}
ok: digits only: contender refused
ok: digits only: release
ok: digits only: key gone
ok: 1024 bytes: getKey() returns the key as given
ok: 1024 bytes: acquire
ok: 1024 bytes: Redis key is lock:{K}
ok: 1024 bytes: contender refused
ok: 1024 bytes: release
ok: 1024 bytes: key gone
ok: 1024 bytes of 2-byte chars: getKey() returns the key as given
ok: 1024 bytes of 2-byte chars: acquire
ok: 1024 bytes of 2-byte chars: Redis key is lock:{K}
ok: 1024 bytes of 2-byte chars: contender refused
ok: 1024 bytes of 2-byte chars: release
ok: 1024 bytes of 2-byte chars: key gone
ok: keys differing in case / trailing space are independent
done
