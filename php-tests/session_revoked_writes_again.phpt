--TEST--
Sessions called directly, as frameworks do (Laravel's store may save twice): once a logout (another request's destroy) revoked this request's lock, its save writes nothing and says so quietly (true, no warning: the logout's outcome, which frameworks would turn into an HTTP 500; inside session_regenerate_id() it is refused), and every later write of that session is dropped, so a second write of a session that was empty when read cannot write the logged-in state back; counted as session_revoked, not as a lost lease (which alerts), also when the watchdog finds it first; and Laravel's migrate() (a fresh id written without a read) writes nothing after such a logout (its destroy of the old id, a second logout, says done, quietly), nor after its lock expired (with a warning), also when it destroyed the old id
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
// The logout's outcome, not a failure: nothing written, told true without a
// warning (frameworks turn a warning into an HTTP 500, and PHP warns of a false).
rl_same('the busy request saves: nothing written, quietly', [true, []], [$busy->write($sid, 'user|s:5:"alice";'), $warnings]);
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
rl_same('the renewed request saves: nothing written, quietly', [true, []], [$renewed->write($sid, 'user|s:5:"alice";t|i:1;'), $warnings]);
rl_same('nothing was written back', 0, $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid"));
$after = RedisLease\metrics();
rl_same('counted as revoked, not as a lost lease', [1, 0],
    [$after['session_revoked'] - $before['session_revoked'], $after['session_lost'] - $before['session_lost']]);
$renewed->close();

// Laravel's migrate() (regenerate() after a login, invalidate() at a logout)
// writes a fresh id it never read. After a logout revoked the session the
// request read, what it would write there is the logged-in state: refused.
$laravel = new RedisLockingSessionHandler($srv['dsn'], ['lock_renew' => false]);
$laravel->open('', 'laravel_session');
$alice = 'user|s:5:"alice";';
$sid = rl_key('migrate-control');
$fresh = rl_key('migrate-control-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('control: a request reads a session', $alice, $laravel->read($sid));
rl_same('... and migrate() writes it under a fresh id', [true, $alice],
    [$laravel->write($fresh, $alice), $raw->cmd('GET', "PHPREDIS_SESSION:$fresh")]);
$sid = rl_key('migrate');
$fresh = rl_key('migrate-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session', $alice, $laravel->read($sid));
rl_same('the logout destroys it', true, $logout->destroy($sid));
$warnings = [];
rl_same('migrate() writes a fresh id: refused, quietly', [false, []], [$laravel->write($fresh, $alice), $warnings]);
rl_same('nothing under either id', [0, 0],
    [$raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh"), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid")]);
$sid = rl_key('migrate-destroy');
$fresh = rl_key('migrate-destroy-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('another request reads a session', $alice, $laravel->read($sid));
rl_same('the logout destroys it', true, $logout->destroy($sid));
// A second logout (invalidate(): migrate(true)) asks for what is done: its
// destroy says so, quietly (a warning is an HTTP 500 to frameworks).
rl_same("migrate(true)'s destroy of the old id: done, quietly", [true, []], [$laravel->destroy($sid), $warnings]);
rl_same('its fresh id is not written, quietly', [false, 0, []],
    [$laravel->write($fresh, $alice), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh"), $warnings]);
// A worker that serves many requests (Octane) keeps one handler: the next
// request's migrate() writes again.
$sid = rl_key('migrate-next');
$fresh = rl_key('migrate-next-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same("the worker's next request reads a session", $alice, $laravel->read($sid));
rl_same('... and its migrate() writes the fresh id', [true, $alice],
    [$laravel->write($fresh, $alice), $raw->cmd('GET', "PHPREDIS_SESSION:$fresh")]);
// A lock that expired before the request let go (not renewed, lock_ttl run
// out): another request may have changed the session since, as a logout does
// when it finds no holder to revoke. Refused as a save of it is, with a warning.
$expiring = new RedisLockingSessionHandler($srv['dsn'], ['lock_renew' => false, 'lock_ttl' => 0.2]);
$expiring->open('', 'laravel_session');
$sid = rl_key('migrate-expired');
$fresh = rl_key('migrate-expired-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session', $alice, $expiring->read($sid));
rl_ok('its lock expires', rl_wait_until(fn() => $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock") === 0, 5.0));
$warnings = [];
rl_same('migrate() writes a fresh id: refused', [false, 0],
    [$expiring->write($fresh, $alice), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh")]);
rl_ok('... with a warning that says the lock expired', count($warnings) === 1
    && str_contains($warnings[0], 'expired (lock_ttl 0.200 s)'), json_encode($warnings));
$expiring->close();
// Its destroy of the old id (migrate(true), session_regenerate_id(true)) after
// the lock expired and another request saved the session: the logout takes
// effect, and the fresh id is not written with what this request read, which
// is older than what it deleted (review, stop 56: it was written, the other
// request's save lost, or its logout undone).
$late = new RedisLockingSessionHandler($srv['dsn'], ['lock_renew' => false, 'lock_ttl' => 0.2]);
$late->open('', 'laravel_session');
$sid = rl_key('migrate-expired-destroy');
$fresh = rl_key('migrate-expired-destroy-fresh');
$raw->cmd('SET', "PHPREDIS_SESSION:$sid", $alice);
rl_same('a request reads a session', $alice, $late->read($sid));
rl_ok('its lock expires', rl_wait_until(fn() => $raw->cmd('EXISTS', "{PHPREDIS_SESSION:$sid}:lock") === 0, 5.0));
$other = new RedisLockingSessionHandler($srv['dsn']);
$other->open('', 'laravel_session');
$bob = 'user|s:3:"bob";';
rl_same('another request reads it and saves', [$alice, true], [$other->read($sid), $other->write($sid, $bob)]);
$other->close();
$warnings = [];
rl_same("migrate(true): the first request's destroy of the old id takes effect", [true, 0],
    [$late->destroy($sid), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$sid")]);
rl_same('... and its write of the fresh id is refused', [false, 0],
    [$late->write($fresh, $alice), $raw->cmd('EXISTS', "PHPREDIS_SESSION:$fresh")]);
rl_ok('... with a warning that says the lock expired', count($warnings) === 1
    && str_contains($warnings[0], 'expired (lock_ttl 0.200 s)'), json_encode($warnings));
$late->close();
$laravel->close();
echo "done\n";
?>
--EXPECT--
ok: the busy request reads a new, empty session
ok: the logout reads it read-only
ok: ... and destroys it
ok: the busy request's lock was revoked
ok: the busy request saves: nothing written, quietly
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
ok: the renewed request saves: nothing written, quietly
ok: nothing was written back
ok: counted as revoked, not as a lost lease
ok: control: a request reads a session
ok: ... and migrate() writes it under a fresh id
ok: a request reads a session
ok: the logout destroys it
ok: migrate() writes a fresh id: refused, quietly
ok: nothing under either id
ok: another request reads a session
ok: the logout destroys it
ok: migrate(true)'s destroy of the old id: done, quietly
ok: its fresh id is not written, quietly
ok: the worker's next request reads a session
ok: ... and its migrate() writes the fresh id
ok: a request reads a session
ok: its lock expires
ok: migrate() writes a fresh id: refused
ok: ... with a warning that says the lock expired
ok: a request reads a session
ok: its lock expires
ok: another request reads it and saves
ok: migrate(true): the first request's destroy of the old id takes effect
ok: ... and its write of the fresh id is refused
ok: ... with a warning that says the lock expired
done
