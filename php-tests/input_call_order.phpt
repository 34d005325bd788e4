--TEST--
Bad input: methods in the wrong order (release/refresh without a hold, double release, nested synchronized, session write/destroy/updateTimestamp before read, close twice, ...) give false/null or a clear error, never a crash or an orphaned lock
--INI--
session.use_cookies=0
session.cache_limiter=
session.save_handler=redis_lease
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
// Session ini settings and ids can only change before output is sent: buffer it.
ob_start();
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
ini_set('session.save_path', $dsn);

$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
/** Our warnings since the last call, then forget them all. */
function take_ours(): array
{
    $ours = array_values(array_filter($GLOBALS['warnings'], static fn($w) => str_contains($w, 'redis_lease:')));
    $GLOBALS['warnings'] = [];
    return $ours;
}

/** Run $fn; its result, or "Class: message" if it threw. */
function outcome(callable $fn): mixed
{
    try {
        return $fn();
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
}

/* ================= DistributedLock ================= */
$key = rl_key('order');
$rk = rl_lock_key($key);
$l = new DistributedLock($key, 5.0, $dsn);

// Never acquired.
rl_same('fresh: release() is false', false, outcome(fn() => $l->release()));
rl_same('fresh: refresh() is false', false, outcome(fn() => $l->refresh()));
rl_same('fresh: refresh(5.0) is false', false, outcome(fn() => $l->refresh(5.0)));
rl_same('fresh: isAcquired() is false', false, outcome(fn() => $l->isAcquired()));
rl_same('fresh: getRemainingLifetime() is null', null, outcome(fn() => $l->getRemainingLifetime()));
rl_same('fresh: getFencingToken() is null', null, outcome(fn() => $l->getFencingToken()));
rl_same('fresh: none of that created a lock key', 0, $raw->cmd('EXISTS', $rk));

// Acquire twice, release twice, then everything after the release.
rl_same('acquire()', true, $l->acquire());
$f1 = $l->getFencingToken();
rl_same('acquire() again while held: true', true, outcome(fn() => $l->acquire()));
rl_same('... without a new lease (same fencing token)', $f1, $l->getFencingToken());
rl_same('release()', true, $l->release());
rl_same('double release(): false', false, outcome(fn() => $l->release()));
rl_same('refresh() after release: false', false, outcome(fn() => $l->refresh()));
rl_same('getFencingToken() after release: null', null, outcome(fn() => $l->getFencingToken()));
rl_same('isAcquired() after release: false', false, outcome(fn() => $l->isAcquired()));
rl_same('getRemainingLifetime() after release: null', null, outcome(fn() => $l->getRemainingLifetime()));
rl_same('refresh() after release did not re-create the lock key', 0, $raw->cmd('EXISTS', $rk));
rl_same('acquire() after all that', true, $l->acquire());
rl_ok('... with a higher fencing token', $l->getFencingToken() > $f1, rl_fmt($l->getFencingToken()));
rl_same('release()', true, $l->release());

// synchronized() inside synchronized() on the same object. Whatever it does
// (re-entrant, or a clear error from the inner call), the lock must stay held
// in Redis for the whole outer callback, and be free afterwards.
$seen = [];
// (Plain closures with use (&...): an arrow function would capture copies.)
$outer = outcome(function () use ($l, $raw, $rk, &$seen) {
    return $l->synchronized(function () use ($l, $raw, $rk, &$seen) {
        $seen['held before the nested call'] = $raw->cmd('EXISTS', $rk);
        $seen['nested call'] = outcome(function () use ($l, $raw, $rk, &$seen) {
            return $l->synchronized(function () use ($raw, $rk, &$seen) {
                $seen['held inside the nested callback'] = $raw->cmd('EXISTS', $rk);
                return 'inner';
            }, 0.5);
        });
        $seen['held after the nested call'] = $raw->cmd('EXISTS', $rk);
        return 'outer';
    }, 1.0);
});
rl_same('nested synchronized(): the lock is held when the outer callback starts', 1, $seen['held before the nested call'] ?? null);
rl_ok('nested synchronized(): the nested call returns the inner result or throws a clear exception',
    ($seen['nested call'] ?? null) === 'inner' || (is_string($seen['nested call'] ?? null) && str_contains($seen['nested call'], 'Exception')),
    rl_fmt($seen['nested call'] ?? null));
rl_same('nested synchronized(): the lock is still held in Redis after the nested call (the outer callback still runs)',
    1, $seen['held after the nested call'] ?? null);
rl_same('nested synchronized(): the outer synchronized() returns its callback\'s result', 'outer', $outer);
rl_same('nested synchronized(): the lock is free afterwards', 0, $raw->cmd('EXISTS', $rk));
rl_same('nested synchronized(): the object still works', [true, true], [$l->acquire(), $l->release()]);

// synchronized() inside synchronized() on another object of the same key: a
// self-deadlock that must end after the inner wait with LockTimeoutException.
$other = new DistributedLock($key, 5.0, $dsn);
$t0 = 0.0;
$inner = null;
$outer = outcome(function () use ($l, $other, &$inner, &$t0) {
    return $l->synchronized(function () use ($other, &$inner, &$t0) {
        $t0 = microtime(true);
        $inner = outcome(fn() => $other->synchronized(fn() => 'never', 0.3));
        $t0 = microtime(true) - $t0;
        return 'outer done';
    });
});
rl_ok('same key, other object, nested: LockTimeoutException', is_string($inner) && str_starts_with($inner, 'RedisLease\LockTimeoutException'), rl_fmt($inner));
rl_ok('... after about the inner wait (0.3 s, < 1.5 s)', $t0 >= 0.29 && $t0 < 1.5, sprintf('%.3f s', $t0));
rl_same('... and the outer synchronized() completes normally', 'outer done', $outer);
rl_same('... and releases', 0, $raw->cmd('EXISTS', $rk));

// The constructor called again on a held lock: the first key must not stay
// locked with nobody able to release it (or the call is refused).
$k2 = rl_key('order-reconstruct');
$re = new DistributedLock($k2, 30.0, $dsn);
rl_same('reconstruct: acquire the first key', true, $re->acquire());
$r = outcome(fn() => $re->__construct($k2 . '-b', 30.0, $dsn));
if ($r === null) {
    rl_same('reconstruct: __construct() again releases the first key\'s lock', 0, $raw->cmd('EXISTS', rl_lock_key($k2)));
} else {
    rl_same('reconstruct: refused, the object still holds its first key', [$k2, true], [$re->getKey(), $re->isAcquired()]);
    $re->release();
}
unset($re);
rl_same('reconstruct: nothing left locked', 0, $raw->cmd('EXISTS', rl_lock_key($k2), rl_lock_key($k2 . '-b')));

/* ================= RedisLockingSessionHandler, direct calls ================= */
$h = new RedisLockingSessionHandler($dsn, ['lock_wait' => 0.2]);
$sid = bin2hex(random_bytes(16));
$dk = 'PHPREDIS_SESSION:' . $sid;
$lk = '{PHPREDIS_SESSION:' . $sid . '}:lock';
take_ours();
rl_same('validateId() before read(): false (no such session)', false, outcome(fn() => $h->validateId($sid)));
// A write-only store (Symfony's MigratingSessionHandler's new one) is told of
// an unchanged session this way: what is stored gets its expiry extended, as
// Symfony's own stores do, without a warning; nothing is written (another
// request may have logged out: the session would come back).
rl_same('updateTimestamp() before read(): true, no warning', [true, 0], [outcome(fn() => $h->updateTimestamp($sid, 'a|i:1;')), count(take_ours())]);
rl_same('... it created no key', [], $raw->cmd('KEYS', '*' . $sid . '*'));
$raw->cmd('SET', $dk, 'newer|i:1;', 'EX', '100');
rl_same('updateTimestamp() of a stored session it never read: true, no warning', [true, 0], [outcome(fn() => $h->updateTimestamp($sid, 'a|i:1;')), count(take_ours())]);
rl_same('... what is stored kept, its expiry extended', ['newer|i:1;', true], [$raw->cmd('GET', $dk), $raw->cmd('TTL', $dk) > 100]);
$raw->cmd('DEL', $dk);
// Frameworks write ids they never read (Laravel's regenerate()): one step, no lock left.
rl_same('write() before read(): true (a write of an id nobody holds)', true, outcome(fn() => $h->write($sid, 'a|i:1;')));
rl_same('... without a warning', 0, count(take_ours()));
rl_same('... only the data key exists (and its short-lived marker)', [], rl_session_lock_keys($raw, $sid));
rl_same('... the data written', 'a|i:1;', $raw->cmd('GET', $dk));
$raw->cmd('SET', $dk, 'old|i:1;');
$r = outcome(fn() => $h->destroy($sid));
rl_ok('destroy() before read(): a bool, no exception', is_bool($r), rl_fmt($r));
rl_same('... the data is gone (destroy deletes it)', 0, $raw->cmd('EXISTS', $dk));
// Only the markers of the write and the destroy (so that either, sent again
// after a lost reply, does not act twice), which expire within a minute.
rl_same('... and no lock keys exist for it, only short-lived markers', [], rl_session_lock_keys($raw, $sid));
rl_same('close() before open()/read(): true', true, outcome(fn() => $h->close()));
rl_same('close() twice: true', true, outcome(fn() => $h->close()));
rl_same('no warnings of ours from close()', [], take_ours());

// write() twice: the second write comes after the first one unlocked, while
// another request holds the session: it must not overwrite that request's data.
rl_same('read()', '', $h->read($sid));
rl_same('write() v1', true, $h->write($sid, 'v|i:1;'));
$h2 = new RedisLockingSessionHandler($dsn);
rl_same('another handler reads (and locks) it', 'v|i:1;', $h2->read($sid));
take_ours();
$r = outcome(fn() => $h->write($sid, 'v|i:3;'));
rl_same('second write() of the first handler (session no longer open): false', false, $r);
rl_same('... without a warning (a conflict, counted as session_write_conflicts)', 0, count(take_ours()));
rl_same('... and the data is not overwritten', 'v|i:1;', $raw->cmd('GET', $dk));
rl_same('... and the other handler still holds the lock', 1, $raw->cmd('EXISTS', $lk));
rl_same('the other handler writes v2', true, $h2->write($sid, 'v|i:2;'));
rl_same('... stored', 'v|i:2;', $raw->cmd('GET', $dk));
rl_same('close() twice after write: true, true', [true, true], [$h->close(), $h->close()]);

// read() of a second id without closing the first: the first is unlocked.
$sidB = bin2hex(random_bytes(16));
rl_same('read(A)', 'v|i:2;', $h->read($sid));
rl_same('read(B) without closing A', '', $h->read($sidB));
rl_same('... A is no longer locked', 0, $raw->cmd('EXISTS', $lk));
rl_same('... write(A) goes only over what this request read of A (unchanged since): true', true, outcome(fn() => $h->write($sid, 'x|i:9;')));
rl_same('... stored', 'x|i:9;', $raw->cmd('GET', $dk));
$raw->cmd('SET', $dk, 'someone|i:1;');
rl_same('... after another request saved A: false', false, outcome(fn() => $h->write($sid, 'x|i:10;')));
rl_same('... whose data is kept', 'someone|i:1;', $raw->cmd('GET', $dk));
rl_same('... write(B) works', true, $h->write($sidB, 'b|i:1;'));
take_ours();

// read(), destroy(), then write(): nothing is re-created.
$sidC = bin2hex(random_bytes(16));
rl_same('read(C)', '', $h->read($sidC));
rl_same('destroy(C)', true, $h->destroy($sidC));
rl_same('write(C) after destroy(): false', false, outcome(fn() => $h->write($sidC, 'c|i:1;')));
rl_same('updateTimestamp(C) after destroy(): false', false, outcome(fn() => $h->updateTimestamp($sidC, 'c|i:1;')));
rl_same('... nothing exists for C', [], rl_session_lock_keys($raw, $sidC) ?: $raw->cmd('KEYS', 'PHPREDIS_SESSION:' . $sidC));
take_ours();

// read(), an early write(), then PHP's lazy write of the same data at the end
// (updateTimestamp()): true, and no warning (review, stop 55: it warned that the
// session was already saved, which frameworks turn into an HTTP 500).
$sidE = bin2hex(random_bytes(16));
rl_same('read(E)', '', $h->read($sidE));
rl_same('write(E) early', true, $h->write($sidE, 'e|i:1;'));
rl_same('updateTimestamp(E) of the same data after it: true', true, outcome(fn() => $h->updateTimestamp($sidE, 'e|i:1;')));
rl_same('... without a warning', [], take_ours());
rl_same('... E keeps its data', 'e|i:1;', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sidE));
// ... and when the data goes back to what was read (PHP's lazy write then calls
// updateTimestamp() with it), that is what the session keeps.
$sidF = bin2hex(random_bytes(16));
$raw->cmd('SET', 'PHPREDIS_SESSION:' . $sidF, 'f|i:1;');
rl_same('read(F)', 'f|i:1;', $h->read($sidF));
rl_same('write(F) early, other data', true, $h->write($sidF, 'g|i:1;'));
rl_same('updateTimestamp(F) of the data read: true', true, outcome(fn() => $h->updateTimestamp($sidF, 'f|i:1;')));
rl_same('... F keeps the data read (the last the request had)', 'f|i:1;', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sidF));
rl_same('... without a warning', [], take_ours());
// The same after an early write() and close().
$sidG = bin2hex(random_bytes(16));
rl_same('read(G)', '', $h->read($sidG));
rl_same('write(G) and close() early', [true, true], [$h->write($sidG, 'g|i:1;'), $h->close()]);
rl_same('updateTimestamp(G) of the data written: true', true, outcome(fn() => $h->updateTimestamp($sidG, 'g|i:1;')));
rl_same('... without a warning', [], take_ours());

// The handler object destroyed while it holds a session lock (read without
// write/close): the lock must not outlive the object.
$sidD = bin2hex(random_bytes(16));
$hd = new RedisLockingSessionHandler($dsn);
rl_same('read(D) with a handler that is then destroyed', '', $hd->read($sidD));
rl_same('... D is locked', 1, $raw->cmd('EXISTS', '{PHPREDIS_SESSION:' . $sidD . '}:lock'));
unset($hd);
rl_same('... the lock is released when the handler is destroyed', 0, $raw->cmd('EXISTS', '{PHPREDIS_SESSION:' . $sidD . '}:lock'));

// Constructor called again while a session is open: same expectation.
$sidE = bin2hex(random_bytes(16));
$he = new RedisLockingSessionHandler($dsn);
rl_same('read(E)', '', $he->read($sidE));
$r = outcome(fn() => $he->__construct($dsn));
rl_same('__construct() again while E is open: E is unlocked (or the call is refused and E stays open)',
    $r === null ? 0 : 1, $raw->cmd('EXISTS', '{PHPREDIS_SESSION:' . $sidE . '}:lock'));
$he->close();
unset($he);

/* ================= Native handler: PHP's session functions in the wrong order ================= */
take_ours();
$php = [];
$php['session_write_close() without a session'] = outcome(fn() => session_write_close());
$php['session_abort() without a session'] = outcome(fn() => session_abort());
$php['session_reset() without a session'] = outcome(fn() => session_reset());
$php['session_destroy() without a session'] = outcome(fn() => session_destroy());
$php['session_regenerate_id() without a session'] = outcome(fn() => session_regenerate_id());
$php['SessionHandler::write() before session_start()'] = outcome(fn() => (new SessionHandler())->write(bin2hex(random_bytes(16)), 'x'));
$php['SessionHandler::destroy() before session_start()'] = outcome(fn() => (new SessionHandler())->destroy(bin2hex(random_bytes(16))));
$php['SessionHandler::close() before session_start()'] = outcome(fn() => (new SessionHandler())->close());
foreach ($php as $label => $r) {
    rl_ok("native: $label: false or PHP's Error, no crash", $r === false || (is_string($r) && str_starts_with($r, 'Error:')), rl_fmt($r));
}
$sidN = bin2hex(random_bytes(16));
session_id($sidN);
rl_same('native: session_start()', true, session_start());
$_SESSION['n'] = 1;
rl_same('native: session_write_close()', true, session_write_close());
rl_same('native: session_write_close() twice: false', false, session_write_close());
rl_same('native: session_destroy() after close: false', false, outcome(fn() => session_destroy()));
rl_same('native: the data survived', 'n|i:1;', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sidN));
session_id($sidN);
rl_same('native: session_start() again', true, session_start());
rl_same('native: session_start() while active: true (PHP ignores it with a notice)', true, outcome(fn() => session_start()));
rl_same('native: session_destroy()', true, session_destroy());
rl_same('native: session_write_close() after destroy: false', false, session_write_close());
rl_same('native: nothing left of the destroyed session', [], rl_session_lock_keys($raw, $sidN) ?: $raw->cmd('KEYS', 'PHPREDIS_SESSION:' . $sidN));
rl_same('native: no warnings of ours in all of this', [], take_ours());

/* ================= Afterwards ================= */
rl_same('the lock still works', [true, true], [$l->acquire(), $l->release()]);
$sidZ = bin2hex(random_bytes(16));
rl_same('a class-form session still works', ['', true], [$h->read($sidZ), $h->write($sidZ, 'z|i:1;')]);
$strays = array_values(array_filter($raw->cmd('KEYS', '*'), static fn($k) => !str_starts_with($k, 'lock:{')
    && !str_starts_with($k, 'PHPREDIS_SESSION:') && !str_starts_with($k, '{PHPREDIS_SESSION:')));
rl_same('every key in Redis is under lock:{ or (the {) PHPREDIS_SESSION: prefix', [], $strays);
$locks = array_values(array_filter($raw->cmd('KEYS', '*'), static fn($k) => str_ends_with($k, '}:lock') || (str_starts_with($k, 'lock:{') && str_ends_with($k, '}'))));
rl_same('no lock of any kind is left held', [], $locks);
echo "done\n";
?>
--EXPECT--
ok: fresh: release() is false
ok: fresh: refresh() is false
ok: fresh: refresh(5.0) is false
ok: fresh: isAcquired() is false
ok: fresh: getRemainingLifetime() is null
ok: fresh: getFencingToken() is null
ok: fresh: none of that created a lock key
ok: acquire()
ok: acquire() again while held: true
ok: ... without a new lease (same fencing token)
ok: release()
ok: double release(): false
ok: refresh() after release: false
ok: getFencingToken() after release: null
ok: isAcquired() after release: false
ok: getRemainingLifetime() after release: null
ok: refresh() after release did not re-create the lock key
ok: acquire() after all that
ok: ... with a higher fencing token
ok: release()
ok: nested synchronized(): the lock is held when the outer callback starts
ok: nested synchronized(): the nested call returns the inner result or throws a clear exception
ok: nested synchronized(): the lock is still held in Redis after the nested call (the outer callback still runs)
ok: nested synchronized(): the outer synchronized() returns its callback's result
ok: nested synchronized(): the lock is free afterwards
ok: nested synchronized(): the object still works
ok: same key, other object, nested: LockTimeoutException
ok: ... after about the inner wait (0.3 s, < 1.5 s)
ok: ... and the outer synchronized() completes normally
ok: ... and releases
ok: reconstruct: acquire the first key
ok: reconstruct: __construct() again releases the first key's lock
ok: reconstruct: nothing left locked
ok: validateId() before read(): false (no such session)
ok: updateTimestamp() before read(): true, no warning
ok: ... it created no key
ok: updateTimestamp() of a stored session it never read: true, no warning
ok: ... what is stored kept, its expiry extended
ok: write() before read(): true (a write of an id nobody holds)
ok: ... without a warning
ok: ... only the data key exists (and its short-lived marker)
ok: ... the data written
ok: destroy() before read(): a bool, no exception
ok: ... the data is gone (destroy deletes it)
ok: ... and no lock keys exist for it, only short-lived markers
ok: close() before open()/read(): true
ok: close() twice: true
ok: no warnings of ours from close()
ok: read()
ok: write() v1
ok: another handler reads (and locks) it
ok: second write() of the first handler (session no longer open): false
ok: ... without a warning (a conflict, counted as session_write_conflicts)
ok: ... and the data is not overwritten
ok: ... and the other handler still holds the lock
ok: the other handler writes v2
ok: ... stored
ok: close() twice after write: true, true
ok: read(A)
ok: read(B) without closing A
ok: ... A is no longer locked
ok: ... write(A) goes only over what this request read of A (unchanged since): true
ok: ... stored
ok: ... after another request saved A: false
ok: ... whose data is kept
ok: ... write(B) works
ok: read(C)
ok: destroy(C)
ok: write(C) after destroy(): false
ok: updateTimestamp(C) after destroy(): false
ok: ... nothing exists for C
ok: read(E)
ok: write(E) early
ok: updateTimestamp(E) of the same data after it: true
ok: ... without a warning
ok: ... E keeps its data
ok: read(F)
ok: write(F) early, other data
ok: updateTimestamp(F) of the data read: true
ok: ... F keeps the data read (the last the request had)
ok: ... without a warning
ok: read(G)
ok: write(G) and close() early
ok: updateTimestamp(G) of the data written: true
ok: ... without a warning
ok: read(D) with a handler that is then destroyed
ok: ... D is locked
ok: ... the lock is released when the handler is destroyed
ok: read(E)
ok: __construct() again while E is open: E is unlocked (or the call is refused and E stays open)
ok: native: session_write_close() without a session: false or PHP's Error, no crash
ok: native: session_abort() without a session: false or PHP's Error, no crash
ok: native: session_reset() without a session: false or PHP's Error, no crash
ok: native: session_destroy() without a session: false or PHP's Error, no crash
ok: native: session_regenerate_id() without a session: false or PHP's Error, no crash
ok: native: SessionHandler::write() before session_start(): false or PHP's Error, no crash
ok: native: SessionHandler::destroy() before session_start(): false or PHP's Error, no crash
ok: native: SessionHandler::close() before session_start(): false or PHP's Error, no crash
ok: native: session_start()
ok: native: session_write_close()
ok: native: session_write_close() twice: false
ok: native: session_destroy() after close: false
ok: native: the data survived
ok: native: session_start() again
ok: native: session_start() while active: true (PHP ignores it with a notice)
ok: native: session_destroy()
ok: native: session_write_close() after destroy: false
ok: native: nothing left of the destroyed session
ok: native: no warnings of ours in all of this
ok: the lock still works
ok: a class-form session still works
ok: every key in Redis is under lock:{ or (the {) PHPREDIS_SESSION: prefix
ok: no lock of any kind is left held
done
