--TEST--
Fault: connection cut after a command reached Redis but before its reply (fault-injecting proxy), for a read hold (acquireRead()) and a semaphore permit: the acquire and the release are resolved; nothing applies twice (one hold per object, never a second permit), no hold is left that its owner does not know of, a late attempt takes nothing
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

/** The token a cut or held command carried (its only 32-hex-digit argument). */
function cut_token(array $ev): ?string
{
    return array_values(preg_grep('/^[0-9a-f]{32}$/', $ev['command'] ?? []))[0] ?? null;
}

const TTL = 5.0;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$proxy = FaultProxy::start($port);
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=1');

/** The event of the proxy's last $name, or a FAIL line. */
function cut_event(FaultProxy $proxy, string $label, string $name = 'cut'): array
{
    $ev = $proxy->awaitEvent($name, 5.0);
    rl_ok("$label: the proxy did the $name", $ev !== null, json_encode($proxy->pendingEvents()));
    return $ev ?? ['reply' => null, 'command' => []];
}

/**
 * The two shapes: a reader of a DistributedLock, and a permit of a semaphore of 2
 * (a second permit taken by a retry would show as two holders).
 */
$shapes = [
    'read' => [
        'make' => static fn(string $k) => new DistributedLock($k, TTL, $GLOBALS['dsn']),
        'take' => static fn($o) => $o->acquireRead(),
        'base' => static fn(string $k) => rl_lock_key($k),
        'mode' => "\r\n\$1\r\nr\r\n",
    ],
    'permit' => [
        'make' => static fn(string $k) => new DistributedSemaphore($k, 2, TTL, $GLOBALS['dsn']),
        'take' => static fn($o) => $o->acquire(),
        'base' => static fn(string $k) => rl_lock_key($k) . ':semaphore',
        'mode' => "\r\n\$1\r\np\r\n",
    ],
];

/** The tokens holding shared holds of $base, per Redis. */
function holders(RlRaw $raw, string $base): array
{
    return $raw->cmd('ZRANGE', "$base:holders", 0, -1);
}

// Warm-up through the proxy: every script is loaded, so a cut command is the script itself.
$warm = new DistributedLock(rl_key('warm'), TTL, $dsn);
rl_same('warm-up: read lock', [true, true, true, true], [$warm->acquireRead(), $warm->isAcquired(), $warm->refresh(), $warm->release()]);
$warmSem = new DistributedSemaphore(rl_key('warm'), 1, TTL, $dsn);
rl_same('warm-up: semaphore', [true, true], [$warmSem->acquire(), $warmSem->release()]);

foreach ($shapes as $shape => $s) {
    $acquireSha = rl_script_marker('acquire.lua');
    $releaseSha = rl_script_marker('release.lua');

    // C1. The acquire's reply is cut; the proxy stays up: resolved, adopted, one hold.
    $k = rl_key("$shape-cut");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $proxy->arm('cut', [$base, $acquireSha, $s['mode']]);
    $r = fault_outcome(fn() => $s['take']($o));
    $ev = cut_event($proxy, "$shape: C1");
    rl_same("$shape: C1: Redis granted it to the cut command", [1, '0'], $ev['reply']);
    rl_same("$shape: C1: the acquire returns true", true, $r['value'] ?? $r['exception']);
    rl_same("$shape: C1: one hold in Redis, the object's (the cut command's token, adopted)", [cut_token($ev) ?? '?'], holders($raw, $base));
    rl_same("$shape: C1: getToken() is it", cut_token($ev) ?? '?', $o->getToken());
    rl_same("$shape: C1: isAcquired()", true, $o->isAcquired());
    rl_same("$shape: C1: release()", true, $o->release());
    rl_same("$shape: C1: nothing held", [], holders($raw, $base));

    // C2. The acquire's reply is cut and the proxy goes down: unknown, then adopted after healing.
    $k = rl_key("$shape-cut-down");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $proxy->arm('cut', [$base, $acquireSha, $s['mode']], 'down');
    $r = fault_outcome(fn() => $s['take']($o));
    $ev = cut_event($proxy, "$shape: C2");
    rl_same("$shape: C2: the acquire throws ConnectionException", 'RedisLease\ConnectionException', $r['exception']);
    rl_ok("$shape: C2: saying the outcome is unknown", str_contains((string) $r['message'], 'unknown'), (string) $r['message']);
    rl_same("$shape: C2: Redis holds it for the cut command", [cut_token($ev) ?? '?'], holders($raw, $base));
    $proxy->up();
    rl_same("$shape: C2: healed: isAcquired() is true (the object adopts the hold Redis granted)", true,
        fault_outcome(fn() => $o->isAcquired())['value']);
    rl_same("$shape: C2: getToken() is the cut command's", cut_token($ev) ?? '?', $o->getToken());
    rl_same("$shape: C2: the acquire again keeps that one hold (extends it)", [true, [cut_token($ev) ?? '?']],
        [$s['take']($o), holders($raw, $base)]);
    rl_same("$shape: C2: release()", true, $o->release());
    rl_same("$shape: C2: nothing held", [], holders($raw, $base));

    // C3. As C2, but the object is only destroyed after healing: the hold is freed, not left to its ttl.
    $k = rl_key("$shape-cut-destroy");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $proxy->arm('cut', [$base, $acquireSha, $s['mode']], 'down');
    $r = fault_outcome(fn() => $s['take']($o));
    cut_event($proxy, "$shape: C3");
    rl_same("$shape: C3: the acquire throws ConnectionException", 'RedisLease\ConnectionException', $r['exception']);
    rl_same("$shape: C3: Redis holds one for the cut command", 1, count(holders($raw, $base)));
    $proxy->up();
    unset($o);
    rl_same("$shape: C3: after the destruction nothing is held", [], holders($raw, $base));

    // C4. The acquire is held back (never reaches Redis) and the proxy goes down; it arrives late.
    $k = rl_key("$shape-hold-down");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $proxy->arm('hold', [$base, $acquireSha, $s['mode']], 'down');
    $r = fault_outcome(fn() => $s['take']($o));
    cut_event($proxy, "$shape: C4", 'hold');
    rl_same("$shape: C4: the acquire throws ConnectionException", 'RedisLease\ConnectionException', $r['exception']);
    rl_same("$shape: C4: Redis has no hold", [], holders($raw, $base));
    $proxy->up();
    rl_same("$shape: C4: healed: isAcquired() is false", false, fault_outcome(fn() => $o->isAcquired())['value']);
    $late = $proxy->flush();
    rl_same("$shape: C4: the late acquire is refused as voided ({0, -2})", [[0, -2]], array_column($late, 'reply'));
    rl_same("$shape: C4: and takes nothing", [], holders($raw, $base));
    rl_same("$shape: C4: the object acquires afresh", true, $s['take']($o));
    rl_same("$shape: C4: one hold", 1, count(holders($raw, $base)));
    rl_same("$shape: C4: release()", true, $o->release());

    // C5. The acquire is held back, the proxy stays up: voided, retried, won; the late one takes nothing.
    $k = rl_key("$shape-hold");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $proxy->arm('hold', [$base, $acquireSha, $s['mode']]);
    $r = fault_outcome(fn() => $s['take']($o));
    cut_event($proxy, "$shape: C5", 'hold');
    rl_same("$shape: C5: the acquire returns true", true, $r['value'] ?? $r['exception']);
    $late = $proxy->flush();
    rl_same("$shape: C5: the late first attempt is refused as voided ({0, -2})", [[0, -2]], array_column($late, 'reply'));
    rl_same("$shape: C5: one hold, the object's", [$o->getToken()], holders($raw, $base));
    rl_same("$shape: C5: release()", true, $o->release());
    rl_same("$shape: C5: nothing held", [], holders($raw, $base));

    // C6. The release's reply is cut (proxy up): retried, reported released, not lost.
    $k = rl_key("$shape-cut-release");
    $base = $s['base']($k);
    $o = $s['make']($k);
    $other = $s['make']($k);
    rl_same("$shape: C6: two holders", [true, true], [$s['take']($o), $s['take']($other)]);
    $lost = RedisLease\metrics()['lock_lost'];
    $proxy->arm('cut', [$base, $releaseSha, $o->getToken()]);
    $r = fault_outcome(fn() => $o->release());
    $ev = cut_event($proxy, "$shape: C6");
    rl_same("$shape: C6: Redis released it for the cut command", 1, $ev['reply']);
    rl_same("$shape: C6: release() returns true", true, $r['value'] ?? $r['exception']);
    rl_same("$shape: C6: no lost hold counted", $lost, RedisLease\metrics()['lock_lost']);
    rl_same("$shape: C6: the other holder's hold is untouched", [$other->getToken()], holders($raw, $base));
    rl_same("$shape: C6: release() again is false (released once)", false, $o->release());
    rl_same("$shape: C6: the other releases", true, $other->release());

    // C7. The release's reply is cut and the proxy goes down: the retry cannot reach Redis.
    $k = rl_key("$shape-cut-release-down");
    $base = $s['base']($k);
    $o = $s['make']($k);
    rl_same("$shape: C7: acquire", true, $s['take']($o));
    $lost = RedisLease\metrics()['lock_lost'];
    $proxy->arm('cut', [$base, $releaseSha], 'down');
    $r = fault_outcome(fn() => $o->release());
    $ev = cut_event($proxy, "$shape: C7");
    rl_same("$shape: C7: Redis released it for the cut command", 1, $ev['reply']);
    rl_same("$shape: C7: release() throws ConnectionException", 'RedisLease\ConnectionException', $r['exception']);
    rl_same("$shape: C7: nothing held", [], holders($raw, $base));
    $proxy->up();
    $r = fault_outcome(fn() => $o->release());
    rl_same("$shape: C7: healed: release() again reports it released by us (true), not lost", true, $r['value'] ?? $r['exception']);
    rl_same("$shape: C7: no lost hold counted", $lost, RedisLease\metrics()['lock_lost']);
    unset($o, $other);
    rl_same("$shape: no key left but void markers (they expire)", [],
        array_values(array_filter($raw->cmd('KEYS', '*' . $shape . '-*'), static fn($x) => !str_contains($x, ':void:')
            || $raw->cmd('PTTL', $x) < 0)));
}
$stats = $proxy->stats();
printf("info: proxy: %d connections, %d commands forwarded, %d cut, %d held\n",
    $stats['accepted'], $stats['forwarded'], $stats['cuts'], $stats['holds']);
echo "done\n";
?>
--EXPECTF--
ok: warm-up: read lock
ok: warm-up: semaphore
ok: read: C1: the proxy did the cut
ok: read: C1: Redis granted it to the cut command
ok: read: C1: the acquire returns true
ok: read: C1: one hold in Redis, the object's (the cut command's token, adopted)
ok: read: C1: getToken() is it
ok: read: C1: isAcquired()
ok: read: C1: release()
ok: read: C1: nothing held
ok: read: C2: the proxy did the cut
ok: read: C2: the acquire throws ConnectionException
ok: read: C2: saying the outcome is unknown
ok: read: C2: Redis holds it for the cut command
ok: read: C2: healed: isAcquired() is true (the object adopts the hold Redis granted)
ok: read: C2: getToken() is the cut command's
ok: read: C2: the acquire again keeps that one hold (extends it)
ok: read: C2: release()
ok: read: C2: nothing held
ok: read: C3: the proxy did the cut
ok: read: C3: the acquire throws ConnectionException
ok: read: C3: Redis holds one for the cut command
ok: read: C3: after the destruction nothing is held
ok: read: C4: the proxy did the hold
ok: read: C4: the acquire throws ConnectionException
ok: read: C4: Redis has no hold
ok: read: C4: healed: isAcquired() is false
ok: read: C4: the late acquire is refused as voided ({0, -2})
ok: read: C4: and takes nothing
ok: read: C4: the object acquires afresh
ok: read: C4: one hold
ok: read: C4: release()
ok: read: C5: the proxy did the hold
ok: read: C5: the acquire returns true
ok: read: C5: the late first attempt is refused as voided ({0, -2})
ok: read: C5: one hold, the object's
ok: read: C5: release()
ok: read: C5: nothing held
ok: read: C6: two holders
ok: read: C6: the proxy did the cut
ok: read: C6: Redis released it for the cut command
ok: read: C6: release() returns true
ok: read: C6: no lost hold counted
ok: read: C6: the other holder's hold is untouched
ok: read: C6: release() again is false (released once)
ok: read: C6: the other releases
ok: read: C7: acquire
ok: read: C7: the proxy did the cut
ok: read: C7: Redis released it for the cut command
ok: read: C7: release() throws ConnectionException
ok: read: C7: nothing held
ok: read: C7: healed: release() again reports it released by us (true), not lost
ok: read: C7: no lost hold counted
ok: read: no key left but void markers (they expire)
ok: permit: C1: the proxy did the cut
ok: permit: C1: Redis granted it to the cut command
ok: permit: C1: the acquire returns true
ok: permit: C1: one hold in Redis, the object's (the cut command's token, adopted)
ok: permit: C1: getToken() is it
ok: permit: C1: isAcquired()
ok: permit: C1: release()
ok: permit: C1: nothing held
ok: permit: C2: the proxy did the cut
ok: permit: C2: the acquire throws ConnectionException
ok: permit: C2: saying the outcome is unknown
ok: permit: C2: Redis holds it for the cut command
ok: permit: C2: healed: isAcquired() is true (the object adopts the hold Redis granted)
ok: permit: C2: getToken() is the cut command's
ok: permit: C2: the acquire again keeps that one hold (extends it)
ok: permit: C2: release()
ok: permit: C2: nothing held
ok: permit: C3: the proxy did the cut
ok: permit: C3: the acquire throws ConnectionException
ok: permit: C3: Redis holds one for the cut command
ok: permit: C3: after the destruction nothing is held
ok: permit: C4: the proxy did the hold
ok: permit: C4: the acquire throws ConnectionException
ok: permit: C4: Redis has no hold
ok: permit: C4: healed: isAcquired() is false
ok: permit: C4: the late acquire is refused as voided ({0, -2})
ok: permit: C4: and takes nothing
ok: permit: C4: the object acquires afresh
ok: permit: C4: one hold
ok: permit: C4: release()
ok: permit: C5: the proxy did the hold
ok: permit: C5: the acquire returns true
ok: permit: C5: the late first attempt is refused as voided ({0, -2})
ok: permit: C5: one hold, the object's
ok: permit: C5: release()
ok: permit: C5: nothing held
ok: permit: C6: two holders
ok: permit: C6: the proxy did the cut
ok: permit: C6: Redis released it for the cut command
ok: permit: C6: release() returns true
ok: permit: C6: no lost hold counted
ok: permit: C6: the other holder's hold is untouched
ok: permit: C6: release() again is false (released once)
ok: permit: C6: the other releases
ok: permit: C7: acquire
ok: permit: C7: the proxy did the cut
ok: permit: C7: Redis released it for the cut command
ok: permit: C7: release() throws ConnectionException
ok: permit: C7: nothing held
ok: permit: C7: healed: release() again reports it released by us (true), not lost
ok: permit: C7: no lost hold counted
ok: permit: no key left but void markers (they expire)
info: proxy: %d connections, %d commands forwarded, %d cut, %d held
done
