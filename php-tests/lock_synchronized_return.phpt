--TEST--
DistributedLock::synchronized(): runs the callback while holding the lock, returns its value, releases afterwards
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('syncret');
$rk = rl_lock_key($k);

final class Counter
{
    public int $n = 0;
    public function bump(): int { return ++$this->n; }
    public static function twice(): string { return 'static-ok'; }
}

$l = new DistributedLock($k, 5.0, $dsn);
$inside = null;
$r = $l->synchronized(function () use ($l, $raw, $rk, &$inside) {
    $inside = [
        'isAcquired' => $l->isAcquired(),
        'exists'     => $raw->cmd('EXISTS', $rk),
        'token'      => $l->getFencingToken(),
        'remaining'  => $l->getRemainingLifetime(),
        'value'      => $raw->cmd('GET', $rk),
    ];
    return ['answer' => 42];
});
rl_same('returns the callback value', ['answer' => 42], $r);
rl_same('inside: isAcquired()', true, $inside['isAcquired']);
rl_same('inside: lock key exists', 1, $inside['exists']);
rl_ok('inside: getFencingToken() is an int', is_int($inside['token']), rl_fmt($inside['token']));
rl_same('inside: lock value carries that token', (string) $inside['token'], explode(':', (string) $inside['value'])[1] ?? null);
rl_ok('inside: getRemainingLifetime() within (4, 5]', is_float($inside['remaining']) && $inside['remaining'] > 4 && $inside['remaining'] <= 5,
    rl_fmt($inside['remaining']));
rl_same('after: lock key gone', 0, $raw->cmd('EXISTS', $rk));
rl_same('after: isAcquired()', false, $l->isAcquired());
rl_same('after: getFencingToken()', null, $l->getFencingToken());

// Other kinds of return values and callables.
$o = new stdClass();
rl_ok('returns the very same object', $l->synchronized(fn() => $o) === $o);
rl_same('returns null', null, $l->synchronized(function () { }));
rl_same('returns false', false, $l->synchronized(fn() => false));
rl_same('returns a float', 1.5, $l->synchronized(fn() => 1.5));
$c = new Counter();
rl_same('instance-method callable [$obj, "bump"]', 1, $l->synchronized([$c, 'bump']));
rl_same('first-class callable $obj->bump(...)', 2, $l->synchronized($c->bump(...)));
rl_same('static method callable "Counter::twice"', 'static-ok', $l->synchronized('Counter::twice'));
rl_same('invokable object', 'invoked', $l->synchronized(new class { public function __invoke() { return 'invoked'; } }));
$gen = $l->synchronized(function () { yield 1; yield 2; });
rl_ok('a generator function returns a Generator', $gen instanceof Generator, rl_fmt($gen));

// The callback is called with no arguments.
rl_same('callback gets no arguments', [], $l->synchronized(fn(...$args) => $args));

// Side effects by reference survive.
$acc = [];
$l->synchronized(function () use (&$acc) { $acc[] = 'x'; });
rl_same('by-reference side effect', ['x'], $acc);

// Nested: a different key inside the callback works; the same key through
// another object is contended.
$inner = new DistributedLock($k . '-inner', 5.0, $dsn);
$same = new DistributedLock($k, 5.0, $dsn);
$res = $l->synchronized(function () use ($inner, $same) {
    return [$inner->synchronized(fn() => 'inner'), $same->acquire()];
});
rl_same('nested synchronized on another key / same key via another object', ['inner', false], $res);
rl_same('both keys free afterwards', 0, $raw->cmd('EXISTS', $rk, rl_lock_key($k . '-inner')));

// The lock can be used normally afterwards.
rl_same('acquire() after synchronized', true, $l->acquire());
rl_same('release()', true, $l->release());

unset($l, $inner, $same);
echo "done\n";
?>
--EXPECT--
ok: returns the callback value
ok: inside: isAcquired()
ok: inside: lock key exists
ok: inside: getFencingToken() is an int
ok: inside: lock value carries that token
ok: inside: getRemainingLifetime() within (4, 5]
ok: after: lock key gone
ok: after: isAcquired()
ok: after: getFencingToken()
ok: returns the very same object
ok: returns null
ok: returns false
ok: returns a float
ok: instance-method callable [$obj, "bump"]
ok: first-class callable $obj->bump(...)
ok: static method callable "Counter::twice"
ok: invokable object
ok: a generator function returns a Generator
ok: callback gets no arguments
ok: by-reference side effect
ok: nested synchronized on another key / same key via another object
ok: both keys free afterwards
ok: acquire() after synchronized
ok: release()
done
