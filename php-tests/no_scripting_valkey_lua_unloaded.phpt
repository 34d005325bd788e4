--TEST--
Valkey 9 with its Lua engine unloaded (MODULE UNLOAD lua: Lua is a module since Valkey 9.0, built in by Debian as a static module; a server can run without it): the first lock or session call fails at once with one error naming the cause ("scripting" in its message: today Valkey's own "ERR Could not find scripting engine 'lua'"), never a hang, false, "lock busy" or a lock wait running out
--SKIPIF--
<?php
$v = (string) shell_exec('redis-server --version 2>/dev/null');
if (!preg_match('/^Valkey server v=(\d+)\./', $v, $m) || (int) $m[1] < 9) {
    die('skip needs Valkey 9 or later as redis-server (Lua as an unloadable module), have: ' . trim($v));
}
?>
--FILE--
<?php
require __DIR__ . '/inc/no_scripting.inc';
$srv = rl_start_redis(['--enable-module-command', 'yes']);
$raw = new RlRaw($srv['port']);
rl_same('MODULE UNLOAD lua', 'OK', $raw->cmd('MODULE', 'UNLOAD', 'lua'));
try {
    $raw->cmd('EVAL', 'return 1', '0');
    rl_ok('EVAL no longer runs', false, 'EVAL still runs');
} catch (RlRedisError $e) {
    rl_ok('EVAL no longer runs', true);
    echo "info: EVAL says: ", $e->getMessage(), "\n";
}
ns_check('Lua engine unloaded', $srv['dsn'] . '?timeout=1&read_timeout=1');
echo "done\n";
?>
--EXPECTF--
ok: MODULE UNLOAD lua
ok: EVAL no longer runs
info: EVAL says: %s
ok: Lua engine unloaded: acquire() throws a LeaseException (not LockTimeoutException) naming the cause
ok: Lua engine unloaded: acquire() fails at once
ok: Lua engine unloaded: acquire() warns nothing besides
ok: Lua engine unloaded: acquire(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: Lua engine unloaded: acquire(wait: 3.0) fails at once
ok: Lua engine unloaded: acquire(wait: 3.0) warns nothing besides
ok: Lua engine unloaded: synchronized(wait: 3.0) throws a LeaseException (not LockTimeoutException) naming the cause
ok: Lua engine unloaded: synchronized(wait: 3.0) fails at once
ok: Lua engine unloaded: synchronized(wait: 3.0) warns nothing besides
ok: Lua engine unloaded: class session_start() is false
ok: Lua engine unloaded: class session_start() gives one warning of ours, naming the cause
ok: Lua engine unloaded: class session_start() fails at once
ok: Lua engine unloaded: native session_start() is false
ok: Lua engine unloaded: native session_start() gives one warning of ours, naming the cause
ok: Lua engine unloaded: native session_start() fails at once
done
