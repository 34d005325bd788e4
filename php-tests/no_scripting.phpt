--TEST--
A server that runs no Lua (EVAL, EVALSHA, FCALL and FUNCTION renamed away, as Redis's rename-command does; the default user's ACL without @scripting): the first lock or session call fails at once with one error naming the cause ("scripting" in its message), never a hang, false, "lock busy" or a lock wait running out
--INI--
session.use_cookies=0
session.cache_limiter=
session.use_strict_mode=0
--FILE--
<?php
require __DIR__ . '/inc/no_scripting.inc';
$q = '?timeout=1&read_timeout=1';

$renamed = rl_start_redis(['--rename-command', 'EVAL', '', '--rename-command', 'EVALSHA', '',
    '--rename-command', 'FCALL', '', '--rename-command', 'FUNCTION', '']);
$raw = new RlRaw($renamed['port']);
try {
    $raw->cmd('EVAL', 'return 1', '0');
    rl_ok('rename-command: EVAL is gone', false, 'EVAL still runs');
} catch (RlRedisError $e) {
    rl_ok('rename-command: EVAL is gone', str_contains($e->getMessage(), 'unknown command'), $e->getMessage());
}
ns_check('EVAL, EVALSHA, FCALL and FUNCTION renamed away', $renamed['dsn'] . $q);

$acl = rl_start_redis();
$raw = new RlRaw($acl['port']);
rl_same('ACL: the default user loses @scripting', 'OK', $raw->cmd('ACL', 'SETUSER', 'default', '-@scripting'));
ns_check('ACL without @scripting', $acl['dsn'] . $q);
echo "done\n";
?>
--EXPECT--
ok: rename-command: EVAL is gone
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire() throws a LeaseException (not LockTimeoutException) naming the cause
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire() fails at once
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire() warns nothing besides
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire(wait: 3.0) fails at once
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: acquire(wait: 3.0) warns nothing besides
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: synchronized(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: synchronized(wait: 3.0) fails at once
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: synchronized(wait: 3.0) warns nothing besides
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: class session_start() is false
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: class session_start() gives one warning of ours, naming the cause
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: class session_start() fails at once
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: native session_start() is false
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: native session_start() gives one warning of ours, naming the cause
ok: EVAL, EVALSHA, FCALL and FUNCTION renamed away: native session_start() fails at once
ok: ACL: the default user loses @scripting
ok: ACL without @scripting: acquire() throws a LeaseException (not LockTimeoutException) naming the cause
ok: ACL without @scripting: acquire() fails at once
ok: ACL without @scripting: acquire() warns nothing besides
ok: ACL without @scripting: acquire(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: ACL without @scripting: acquire(wait: 3.0) fails at once
ok: ACL without @scripting: acquire(wait: 3.0) warns nothing besides
ok: ACL without @scripting: synchronized(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: ACL without @scripting: synchronized(wait: 3.0) fails at once
ok: ACL without @scripting: synchronized(wait: 3.0) warns nothing besides
ok: ACL without @scripting: class session_start() is false
ok: ACL without @scripting: class session_start() gives one warning of ours, naming the cause
ok: ACL without @scripting: class session_start() fails at once
ok: ACL without @scripting: native session_start() is false
ok: ACL without @scripting: native session_start() gives one warning of ours, naming the cause
ok: ACL without @scripting: native session_start() fails at once
done
