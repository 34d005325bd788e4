--TEST--
Sessions called directly, as frameworks do (Laravel's store may save twice): once a logout (another request's destroy) revoked this request's lock, its save is refused with a warning that names the logout (a success would let session_regenerate_id() go on under a new id), and every later write of that session is dropped, so a second write of a session that was empty when read cannot write the logged-in state back; counted as session_revoked, not as a lost lease (which alerts), also when the watchdog finds it first
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
// Not renewed: the test's own pace decides when the busy request saves.
$busy = new RedisLockingSessionHandler($srv['dsn'], ['lock_renew' => false]);
$logout = new RedisLockingSessionHandler($srv['dsn'], ['lock_wait' => 0.1, 'on_lock_timeout' => 'readonly']);
$busy->open('', 'PHPSESSID');
$logout->open('', 'PHPSESSID');
$sid = rl_key('revoked');
$before = RedisLease\metrics();
rl_same('the busy request reads a new, empty session', '', $busy->read($sid));
rl_same('the logout reads it read-only', ['', true], [$logout->read($sid), $logout->isReadOnly()]);
rl_same('... and destroys it', true, $logout->destroy($sid));
rl_same("the busy request's lock was revoked", 0, $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock"));
rl_same('the busy request saves: refused', false, $busy->write($sid, 'user|s:5:"alice";'));
rl_ok('... with one warning that names the logout', count($warnings) === 1
    && str_contains($warnings[0], 'another request destroyed it (a logout)'), json_encode($warnings));
$warnings = [];
rl_same('it saves again: dropped, quietly', [true, []], [$busy->write($sid, 'user|s:5:"alice";t|i:2;'), $warnings]);
rl_same('nothing was written back', 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid"));
$after = RedisLease\metrics();
rl_same('counted as revoked, not as a lost lease', [1, 0],
    [$after['session_revoked'] - $before['session_revoked'], $after['session_lost'] - $before['session_lost']]);
$busy->close();

// Unlocked without a save (session_abort(), read_and_close), then written
// directly: the close was told of the logout, and the write is dropped too.
$sid = rl_key('revoked-closed');
$before = RedisLease\metrics();
rl_same('a request reads another new session', '', $busy->read($sid));
rl_same('the logout destroys it', ['', true], [$logout->read($sid), $logout->destroy($sid)]);
rl_same('the request unlocks it without a save', true, $busy->close());
rl_same('a later write of it is dropped, quietly', [true, []], [$busy->write($sid, 'user|s:5:"alice";'), $warnings]);
rl_same('nothing was written back', 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid"));
$after = RedisLease\metrics();
rl_same('the unlock counted as revoked, not as a lost lease', [1, 0],
    [$after['session_revoked'] - $before['session_revoked'], $after['session_lost'] - $before['session_lost']]);
$logout->close();

// Renewed by the watchdog: its renewal after the logout finds the hold
// revoked, which is not a lost lease either (whichever of it and the save
// comes first; tests/session.rs sees the watchdog's own verdict).
// Renewed every 2 s: a late renewal on a loaded machine does not reach the
// lease's end (where the hold would have expired, not been revoked).
$renewed = new RedisLockingSessionHandler($srv['dsn'], ['lock_ttl' => 6]);
$renewed->open('', 'PHPSESSID');
$sid = rl_key('revoked-renewed');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", 'user|s:5:"alice";');
$before = RedisLease\metrics();
rl_same('a renewed request reads the session', 'user|s:5:"alice";', $renewed->read($sid));
rl_same('the logout destroys it', [true, 0], [$logout->destroy($sid), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid")]);
$trips = RedisLease\metrics()['renewal_round_trips'];
rl_ok('the watchdog renews again after the logout',
    rl_wait_until(fn() => RedisLease\metrics()['renewal_round_trips'] > $trips, 10.0));
rl_same('the renewed request saves: refused', false, $renewed->write($sid, 'user|s:5:"alice";t|i:1;'));
rl_same('nothing was written back', 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid"));
$after = RedisLease\metrics();
rl_same('counted as revoked, not as a lost lease', [1, 0],
    [$after['session_revoked'] - $before['session_revoked'], $after['session_lost'] - $before['session_lost']]);
rl_ok('... with the warning that names the logout', count($warnings) === 1
    && str_contains($warnings[0], 'another request destroyed it (a logout)'), json_encode($warnings));
$renewed->close();
echo "done\n";
?>
--EXPECT--
ok: the busy request reads a new, empty session
ok: the logout reads it read-only
ok: ... and destroys it
ok: the busy request's lock was revoked
ok: the busy request saves: refused
ok: ... with one warning that names the logout
ok: it saves again: dropped, quietly
ok: nothing was written back
ok: counted as revoked, not as a lost lease
ok: a request reads another new session
ok: the logout destroys it
ok: the request unlocks it without a save
ok: a later write of it is dropped, quietly
ok: nothing was written back
ok: the unlock counted as revoked, not as a lost lease
ok: a renewed request reads the session
ok: the logout destroys it
ok: the watchdog renews again after the logout
ok: the renewed request saves: refused
ok: nothing was written back
ok: counted as revoked, not as a lost lease
ok: ... with the warning that names the logout
done
