--TEST--
Sessions called directly, as Laravel does: after an early save (session()->save()) the request moves to a fresh id (regenerate(): migrate(false), or migrate(true), which destroys the old id first). A logout by another request in between stays done: the fresh id is refused quietly (false without a warning, counted as a write conflict). Another request's save in between is an ordinary concurrent write (as session_regenerate_id(false), which saves the old id, meets the page's other requests): the fresh id is written, as with nothing in between. Review, stop 57: before, the fresh id was written with the logged-in state after a logout, which was undone
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
$other = new RedisLockingSessionHandler($srv['dsn']);
$other->open('', 'PHPSESSID');
$conflicts = static fn(): int => RedisLease\metrics()['session_write_conflicts'];
$state = 'user|s:5:"alice";';

foreach (['logout, migrate(false)' => [true, false], 'logout, migrate(true)' => [true, true],
          'save, migrate(false)' => [false, false], 'save, migrate(true)' => [false, true],
          'nothing in between' => [null, false]] as $case => [$logout, $destroy]) {
    $h = new RedisLockingSessionHandler($srv['dsn']);
    $h->open('', 'PHPSESSID');
    $old = rl_key('early-old');
    $fresh = rl_key('early-fresh');
    $warnings = [];
    $before = $conflicts();
    rl_same("$case: the request reads a new session", '', $h->read($old));
    rl_same("$case: ... and saves it early", true, $h->write($old, $state));
    if ($logout === true) {
        rl_same("$case: another request logs out", true, $other->destroy($old));
    } elseif ($logout === false) {
        rl_same("$case: another request saves", ["$state", true],
            [$other->read($old), $other->write($old, "{$state}cart|i:1;")]);
    }
    if ($destroy) {
        rl_same("$case: the old id is destroyed", true, $h->destroy($old));
    }
    $written = $h->write($fresh, "{$state}t|i:2;");
    if ($logout !== true) {
        rl_same("$case: the fresh id is written", [true, "{$state}t|i:2;", [], 0],
            [$written, $raw->cmd('GET', "PHPREDIS_SESSION:$fresh"), $warnings, $conflicts() - $before]);
    } else {
        rl_same("$case: the fresh id is refused, quietly", [false, []], [$written, $warnings]);
        rl_same("$case: ... nothing written under it", 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh"));
        rl_same("$case: ... counted as a write conflict", 1, $conflicts() - $before);
    }
    $h->close();
}
echo "done\n";
?>
--EXPECT--
ok: logout, migrate(false): the request reads a new session
ok: logout, migrate(false): ... and saves it early
ok: logout, migrate(false): another request logs out
ok: logout, migrate(false): the fresh id is refused, quietly
ok: logout, migrate(false): ... nothing written under it
ok: logout, migrate(false): ... counted as a write conflict
ok: logout, migrate(true): the request reads a new session
ok: logout, migrate(true): ... and saves it early
ok: logout, migrate(true): another request logs out
ok: logout, migrate(true): the old id is destroyed
ok: logout, migrate(true): the fresh id is refused, quietly
ok: logout, migrate(true): ... nothing written under it
ok: logout, migrate(true): ... counted as a write conflict
ok: save, migrate(false): the request reads a new session
ok: save, migrate(false): ... and saves it early
ok: save, migrate(false): another request saves
ok: save, migrate(false): the fresh id is written
ok: save, migrate(true): the request reads a new session
ok: save, migrate(true): ... and saves it early
ok: save, migrate(true): another request saves
ok: save, migrate(true): the old id is destroyed
ok: save, migrate(true): the fresh id is written
ok: nothing in between: the request reads a new session
ok: nothing in between: ... and saves it early
ok: nothing in between: the fresh id is written
done
