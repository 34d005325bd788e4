--TEST--
Session keys compatible with phpredis (class and native forms): PHPREDIS_SESSION:<id> holds the serializer's raw string; tcp:// prefix/database, unix:// DSNs; lock key names
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$sock = sys_get_temp_dir() . '/rl-compat-' . getmypid() . '-' . bin2hex(random_bytes(3)) . '.sock';
rl_on_cleanup(static function () use ($sock): void {
    @unlink($sock);
});
$srv = rl_start_redis(['--unixsocket', $sock, '--unixsocketperm', '700']);
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

/** Child code: start $sid, report the data read, apply $change (PHP code), save. */
function rw_code(string $sid, string $change): string
{
    return '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$data = $s["started"] ? $_SESSION : null;
' . $change . '
$w = $s["started"] ? session_write_close() : null;
app_reply($s + ["data" => $data, "write_closed" => $w]);
';
}

foreach (ST_FORMS as $form) {
    // --- data written the way phpredis writes it is read by us ---
    $sid = st_sid();
    $raw->cmd('SET', 'PHPREDIS_SESSION:' . $sid, 'a|i:1;', 'EX', 600);
    $j = st_child_json(st_child($form, $dsn, [], rw_code($sid, '$_SESSION["b"] = "x";'))) ?? [];
    rl_same("$form: reads phpredis's data", ['a' => 1], $j['data'] ?? null);
    rl_same("$form: no warnings", [], $j['warnings'] ?? null);
    // --- and what we write is what phpredis would read: a plain string ---
    rl_same("$form: key type is string", 'string', $raw->cmd('TYPE', 'PHPREDIS_SESSION:' . $sid));
    rl_same("$form: raw value is the serializer's output", 'a|i:1;b|s:1:"x";', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid));
    $ttl = $raw->cmd('TTL', 'PHPREDIS_SESSION:' . $sid);
    rl_ok("$form: ttl is session.gc_maxlifetime (1440)", $ttl > 1400 && $ttl <= 1440, rl_fmt($ttl));

    // --- another serializer: stored verbatim too ---
    $sid = st_sid();
    $j = st_child_json(st_child($form, $dsn, [], rw_code($sid, '$_SESSION["z"] = [1, "two"];'),
        ['session.serialize_handler' => 'php_serialize'])) ?? [];
    rl_same("$form: php_serialize data stored verbatim", serialize(['z' => [1, 'two']]), $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid));

    // --- lock key name and value while a request holds the session ---
    $sid = st_sid();
    $holder = st_child($form, $dsn, ['lock_ttl' => 7], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s), "\n";
fgets(STDIN);
$_SESSION["h"] = 1;
session_write_close();
');
    rl_same("$form: holder started", true, (st_child_json($holder) ?? [])['started'] ?? null);
    $lock = '{PHPREDIS_SESSION:' . $sid . '}:lock';
    $v = $raw->cmd('GET', $lock);
    rl_ok("$form: lock at {PHPREDIS_SESSION:<id>}:lock = <32 hex>:0", is_string($v) && preg_match('/^[0-9a-f]{32}:0$/', $v) === 1, rl_fmt($v));
    $pttl = $raw->cmd('PTTL', $lock);
    rl_ok("$form: lock expires after lock_ttl (7 s)", $pttl > 6000 && $pttl <= 7000, rl_fmt($pttl));
    rl_same("$form: a new session has no data key until saved", 0, $raw->cmd('EXISTS', 'PHPREDIS_SESSION:' . $sid));
    $holder->send('go');
    rl_same("$form: holder exit status", 0, $holder->wait(10.0));
    rl_same("$form: saved and unlocked", ['h|i:1;', 0], [$raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid), $raw->cmd('EXISTS', $lock)]);

    // --- tcp://host:port?prefix=X&database=1 ---
    $sid = st_sid();
    $tcp = 'tcp://127.0.0.1:' . $srv['port'] . '?prefix=myapp:sess:&database=1&timeout=2&read_timeout=3';
    $raw->cmd('SELECT', '1');
    $raw->cmd('SET', 'myapp:sess:' . $sid, 'p|i:1;', 'EX', 600);
    $raw->cmd('SELECT', '0');
    $holder = st_child($form, $tcp, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s + ["data" => $_SESSION]), "\n";
fgets(STDIN);
$_SESSION["q"] = 2;
session_write_close();
');
    $j = st_child_json($holder) ?? [];
    rl_same("$form, prefix+database: read the prefixed key in db 1", ['p' => 1], $j['data'] ?? null);
    $raw->cmd('SELECT', '1');
    $v = $raw->cmd('GET', '{myapp:sess:' . $sid . '}:lock');
    rl_ok("$form, prefix+database: lock key {myapp:sess:<id>}:lock in db 1", is_string($v), rl_fmt($v));
    $raw->cmd('SELECT', '0');
    $holder->send('go');
    rl_same("$form, prefix+database: holder exit status", 0, $holder->wait(10.0));
    $raw->cmd('SELECT', '1');
    rl_same("$form, prefix+database: data written to db 1 under the prefix", 'p|i:1;q|i:2;', $raw->cmd('GET', 'myapp:sess:' . $sid));
    rl_same("$form, prefix+database: db 1 holds only that key", ['myapp:sess:' . $sid], $raw->cmd('KEYS', "*$sid*"));
    $raw->cmd('SELECT', '0');
    rl_same("$form, prefix+database: nothing of this session in db 0", [], $raw->cmd('KEYS', "*$sid*"));

    // --- the prefix option (constructor option / redis_lease.session.prefix) ---
    $sid = st_sid();
    $holder = st_child($form, $dsn, ['prefix' => 'app:sess:'], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
echo json_encode($s), "\n";
fgets(STDIN);
$_SESSION["o"] = 1;
session_write_close();
');
    rl_same("$form, prefix option: holder started", true, (st_child_json($holder) ?? [])['started'] ?? null);
    rl_same("$form, prefix option: lock at {app:sess:<id>}:lock", ['{app:sess:' . $sid . '}:lock'], $raw->cmd('KEYS', "*$sid*"));
    $holder->send('go');
    rl_same("$form, prefix option: holder exit status", 0, $holder->wait(10.0));
    rl_same("$form, prefix option: data at app:sess:<id> only", ['app:sess:' . $sid], $raw->cmd('KEYS', "*$sid*"));
    rl_same("$form, prefix option: data", 'o|i:1;', $raw->cmd('GET', 'app:sess:' . $sid));

    // --- unix:///path ---
    $sid = st_sid();
    $raw->cmd('SET', 'PHPREDIS_SESSION:' . $sid, 'u|i:1;', 'EX', 600);
    $j = st_child_json(st_child($form, 'unix://' . $sock, [], rw_code($sid, '$_SESSION["v"] = 2;'))) ?? [];
    rl_same("$form, unix socket: data read", ['u' => 1], $j['data'] ?? null);
    rl_same("$form, unix socket: no warnings", [], $j['warnings'] ?? null);
    rl_same("$form, unix socket: data written", 'u|i:1;v|i:2;', $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid));
}
echo "done\n";
?>
--EXPECT--
ok: class: reads phpredis's data
ok: class: no warnings
ok: class: key type is string
ok: class: raw value is the serializer's output
ok: class: ttl is session.gc_maxlifetime (1440)
ok: class: php_serialize data stored verbatim
ok: class: holder started
ok: class: lock at {PHPREDIS_SESSION:<id>}:lock = <32 hex>:0
ok: class: lock expires after lock_ttl (7 s)
ok: class: a new session has no data key until saved
ok: class: holder exit status
ok: class: saved and unlocked
ok: class, prefix+database: read the prefixed key in db 1
ok: class, prefix+database: lock key {myapp:sess:<id>}:lock in db 1
ok: class, prefix+database: holder exit status
ok: class, prefix+database: data written to db 1 under the prefix
ok: class, prefix+database: db 1 holds only that key
ok: class, prefix+database: nothing of this session in db 0
ok: class, prefix option: holder started
ok: class, prefix option: lock at {app:sess:<id>}:lock
ok: class, prefix option: holder exit status
ok: class, prefix option: data at app:sess:<id> only
ok: class, prefix option: data
ok: class, unix socket: data read
ok: class, unix socket: no warnings
ok: class, unix socket: data written
ok: native: reads phpredis's data
ok: native: no warnings
ok: native: key type is string
ok: native: raw value is the serializer's output
ok: native: ttl is session.gc_maxlifetime (1440)
ok: native: php_serialize data stored verbatim
ok: native: holder started
ok: native: lock at {PHPREDIS_SESSION:<id>}:lock = <32 hex>:0
ok: native: lock expires after lock_ttl (7 s)
ok: native: a new session has no data key until saved
ok: native: holder exit status
ok: native: saved and unlocked
ok: native, prefix+database: read the prefixed key in db 1
ok: native, prefix+database: lock key {myapp:sess:<id>}:lock in db 1
ok: native, prefix+database: holder exit status
ok: native, prefix+database: data written to db 1 under the prefix
ok: native, prefix+database: db 1 holds only that key
ok: native, prefix+database: nothing of this session in db 0
ok: native, prefix option: holder started
ok: native, prefix option: lock at {app:sess:<id>}:lock
ok: native, prefix option: holder exit status
ok: native, prefix option: data at app:sess:<id> only
ok: native, prefix option: data
ok: native, unix socket: data read
ok: native, unix socket: no warnings
ok: native, unix socket: data written
done
