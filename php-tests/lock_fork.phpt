--TEST--
DistributedLock and pcntl_fork(): the child uses its own connection for its own lock; the parent's lock keeps working, also after the child exits
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$ka = rl_key('forkparent');
$kb = rl_key('forkchild');
$rka = rl_lock_key($ka);

$a = new DistributedLock($ka, 30.0, $dsn);
rl_same('parent acquires before fork', true, $a->acquire());
$tokA = $a->getFencingToken();
$valA = $raw->cmd('GET', $rka);
$result = rl_tempfile('.txt');

$pid = pcntl_fork();
if ($pid === -1) {
    echo "FAIL: pcntl_fork failed\n";
    exit(1);
}
if ($pid === 0) {
    // Child: its own lock on another key, many round trips while the parent
    // also talks to Redis. A shared socket would mix up the replies.
    $msg = 'child-ok';
    try {
        $b = new DistributedLock($kb, 30.0, $dsn);
        for ($i = 0; $i < 200; $i++) {
            $r = [$b->acquire(), $b->isAcquired(), $b->getFencingToken() !== null, $b->release()];
            if ($r !== [true, true, true, true]) {
                $msg = "child iteration $i: " . json_encode($r);
                break;
            }
        }
        unset($b);
    } catch (Throwable $e) {
        $msg = 'child exception ' . get_class($e) . ': ' . $e->getMessage();
    }
    file_put_contents($result, $msg);
    // Normal exit: shutdown and destructors run in the child, including for
    // its inherited copy of the parent's $a.
    exit(0);
}

$parentBad = null;
for ($i = 0; $i < 200; $i++) {
    $r = [$a->isAcquired(), $a->getFencingToken() === $tokA, $a->refresh()];
    if ($r !== [true, true, true]) {
        $parentBad = "parent iteration $i: " . json_encode($r);
        break;
    }
}
rl_ok('parent kept working while the child ran', $parentBad === null, (string) $parentBad);

// Bounded wait for the child.
$status = 0;
$reaped = rl_wait_until(function () use ($pid, &$status) {
    return pcntl_waitpid($pid, $status, WNOHANG) === $pid;
}, 20.0);
if (!$reaped) {
    rl_kill_pid($pid, 'KILL');
    pcntl_waitpid($pid, $status);
}
rl_ok('child exited by itself', $reaped);
rl_same('child exit status', 0, pcntl_wifexited($status) ? pcntl_wexitstatus($status) : 'signal ' . pcntl_wtermsig($status));
rl_same('child result', 'child-ok', (string) @file_get_contents($result));

rl_same("parent's lock value intact after the child exited", $valA, $raw->cmd('GET', $rka));
rl_same('parent isAcquired()', true, $a->isAcquired());
rl_same('parent refresh()', true, $a->refresh());
rl_same('parent getFencingToken() unchanged', $tokA, $a->getFencingToken());
rl_same('parent release()', true, $a->release());
rl_same("child's key free", 0, $raw->cmd('EXISTS', rl_lock_key($kb)));
rl_same('parent can acquire again', true, $a->acquire());
rl_same('parent release()', true, $a->release());

unset($a);
echo "done\n";
?>
--EXPECT--
ok: parent acquires before fork
ok: parent kept working while the child ran
ok: child exited by itself
ok: child exit status
ok: child result
ok: parent's lock value intact after the child exited
ok: parent isAcquired()
ok: parent refresh()
ok: parent getFencingToken() unchanged
ok: parent release()
ok: child's key free
ok: parent can acquire again
ok: parent release()
done
