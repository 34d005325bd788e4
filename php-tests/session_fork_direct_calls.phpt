--TEST--
Sessions after pcntl_fork(), called directly (a handler built in the parent, a framework's or a task's own calls): the child's write() of a session the parent does not hold open are done, and its destroy() of one is done without a warning; only the session the parent has open is left alone (no write, unlock or destroy), whatever the order of the child's calls
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$h = new RedisLockingSessionHandler($srv['dsn']);
$h->open('', 'PHPSESSID');
[$fresh, $gone, $parents] = [rl_key('fork-fresh'), rl_key('fork-gone'), rl_key('fork-parents')];
$raw->cmd('SET', "PHPREDIS_SESSION:$gone", 'x|i:1;');
// The parent holds one session open across the fork.
rl_same('the parent opens its session', '', $h->read($parents));
$result = rl_tempfile('.json');
$pid = pcntl_fork();
if ($pid === 0) {
    $warnings = [];
    set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
        $warnings[] = $msg;
        return true;
    });
    // The child's first call is what tells it it is a child.
    $out = ['fresh' => $h->write($fresh, 'a|i:1;'), 'gone' => $h->destroy($gone)];
    // Not its first call: the parent's session is still the parent's.
    $out['parents'] = $h->write($parents, 'child|i:1;');
    $out['parents_destroyed'] = $h->destroy($parents);
    $out['warnings'] = $warnings;
    file_put_contents($result, json_encode($out));
    exit(0);
}
pcntl_waitpid($pid, $st);
$out = json_decode((string) file_get_contents($result), true) ?? [];
rl_same("the child's write of the parent's session is left alone", [true, null], [$out['parents'] ?? null, $raw->cmd('GET', "PHPREDIS_SESSION:$parents")]);
rl_same("the child's destroy of the parent's session is refused", false, $out['parents_destroyed'] ?? null);
rl_same("the parent's lock is still held", 1, $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$parents}:lock"));
rl_same("the child's write of a fresh session is done", [true, 'a|i:1;'], [$out['fresh'] ?? null, $raw->cmd('GET', "PHPREDIS_SESSION:$fresh")]);
rl_same("the child's destroy of another session is done", [true, 0], [$out['gone'] ?? null, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$gone")]);
rl_ok('one warning in the child: the parent\'s session is not its to destroy', count($out['warnings'] ?? []) === 1
    && str_contains($out['warnings'][0], 'belongs to the parent process'), json_encode($out['warnings'] ?? null));
rl_same('the parent saves its session', true, $h->write($parents, 'parent|i:1;'));
rl_same("the parent's data", 'parent|i:1;', $raw->cmd('GET', "PHPREDIS_SESSION:$parents"));
echo "done\n";
?>
--EXPECT--
ok: the parent opens its session
ok: the child's write of the parent's session is left alone
ok: the child's destroy of the parent's session is refused
ok: the parent's lock is still held
ok: the child's write of a fresh session is done
ok: the child's destroy of another session is done
ok: one warning in the child: the parent's session is not its to destroy
ok: the parent saves its session
ok: the parent's data
done
