--TEST--
Compressed sessions both ways with phpredis 6.1+ itself (lzf, lz4, zstd): a session phpredis wrote compressed is read by redis_lease (class and native forms) and one redis_lease wrote is read by phpredis; a rolling deploy (a phpredis pool and a redis_lease pool with the same php.ini settings, one session, requests alternating) loses nothing; the seeds' race keeps 100 of 100 with compression on
--SKIPIF--
<?php
// phpredis with session compression (6.1+, built with lzf, lz4 and zstd, as trixie's php8.4-redis 6.2 is).
$probe = escapeshellarg(PHP_BINARY) . ' -n -d extension=igbinary -d extension=redis -r '
    . escapeshellarg('echo phpversion("redis"), " ", ini_get("redis.session.compression") === false ? "none" : "has";')
    . ' 2>/dev/null';
[$v, $has] = explode(' ', trim((string) shell_exec($probe))) + [1 => 'none'];
if ($v === '' || version_compare($v, '6.1.0', '<') || $has !== 'has') {
    die('skip phpredis 6.1+ with session compression is not installed for PHP ' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION
        . ($v !== '' ? " (have phpredis $v)" : ''));
}
?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$savePath = "tcp://127.0.0.1:{$srv['port']}";
$blob = str_repeat('{"cart":[1,2,3],"seen":"2026-12-02T10:00:00Z"} ', 85);

/** A phpredis CLI child (redis_lease not loaded) running $code with session ini for $algo. */
function phpredis(string $savePath, string $algo, string $code): ?array
{
    $cmd = escapeshellarg(PHP_BINARY) . ' -n -d extension=igbinary -d extension=redis'
        . ' -d session.save_handler=redis -d session.save_path=' . escapeshellarg($savePath)
        . ' -d redis.session.compression=' . $algo . ' -d session.use_cookies=0 -d session.cache_limiter='
        . ' -r ' . escapeshellarg($code);
    return json_decode((string) shell_exec($cmd . ' 2>&1'), true);
}

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

foreach (['lzf', 'lz4', 'zstd'] as $algo) {
    foreach (ST_FORMS as $form) {
        // phpredis writes it compressed...
        $sid = st_sid();
        $j = phpredis($savePath, $algo, 'session_id(' . var_export($sid, true) . '); session_start(); $_SESSION["blob"] = '
            . var_export($blob, true) . '; echo json_encode(["w" => session_write_close()]);');
        rl_same("$algo/$form: phpredis wrote the session", true, $j['w'] ?? null);
        $stored = (string) $raw->cmd('GET', st_data_key($sid));
        rl_ok("$algo/$form: phpredis stored it compressed", strlen($stored) < 1000, (string) strlen($stored));
        // ... redis_lease reads it, with phpredis's own setting in php.ini (no option of ours) ...
        $j = st_child_json(st_child($form, $dsn, [], rw_code($sid, '$_SESSION["ours"] = 1;'),
            ['redis.session.compression' => $algo])) ?? [];
        rl_same("$algo/$form: redis_lease reads what phpredis wrote", [$blob, []], [$j['data']['blob'] ?? null, $j['warnings'] ?? null]);
        rl_same("$algo/$form: ... and writes it back compressed", true, strlen((string) $raw->cmd('GET', st_data_key($sid))) < 1000);
        // ... and phpredis reads what redis_lease wrote.
        $j = phpredis($savePath, $algo, 'session_id(' . var_export($sid, true) . '); session_start();'
            . ' echo json_encode(["blob" => ($_SESSION["blob"] ?? null) === ' . var_export($blob, true) . ', "ours" => $_SESSION["ours"] ?? null]);');
        rl_same("$algo/$form: phpredis reads what redis_lease wrote", ['blob' => true, 'ours' => 1], $j);
    }

    // A rolling deploy: a phpredis pool and a redis_lease pool share php.ini's session settings.
    $ini = ['session.save_handler' => 'redis', 'session.save_path' => $savePath, 'redis.session.compression' => $algo,
        'redis.session.locking_enabled' => '1'] + st_common_ini();
    $old = FpmPool::start(['max_children' => 2, 'extensions' => ['igbinary', 'redis'], 'without_redis_lease' => true, 'ini' => $ini]);
    $new = FpmPool::start(['max_children' => 2, 'ini' => ['session.save_handler' => 'redis_lease'] + $ini]);
    $sid = st_sid();
    $keys = [];
    for ($i = 0; $i < 30; $i++) {
        $pool = $i % 2 === 0 ? $old : $new;
        $r = $pool->client()->request(FcgiClient::params(ST_APP . '/add_key.php', ['mode' => 'ini', 'sid' => $sid, 'key' => "k$i"]), '', 10.0);
        $j = $r->ok() ? $r->json() : null;
        if (($j['write_closed'] ?? null) === true && ($j['count_before'] ?? -1) === $i) {
            $keys[] = "k$i";
        }
    }
    $old->stop();
    $new->stop();
    rl_same("$algo: rolling deploy, 30 requests alternating between phpredis and redis_lease: each saw all before it", 30, count($keys));
    $j = st_child_json(st_child('native', $dsn, ['compression' => $algo], rw_code($sid, ''))) ?? [];
    rl_same("$algo: ... and the session holds all 30 keys", 30, count($j['data'] ?? []));
}

// The seeds' race with compression on: 100 concurrent requests on one session.
foreach (ST_FORMS as $form) {
    $pool = st_pool($form, $dsn, ['compression' => 'lz4'], 'ini', [], 16);
    $sid = st_sid();
    $reqs = [];
    for ($i = 0; $i < 100; $i++) {
        $reqs[] = st_req($form, $dsn, ['compression' => 'lz4'], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 1]);
    }
    $rs = $pool->client()->multi($reqs, 60.0);
    $pool->stop();
    $j = st_child_json(st_child($form, $dsn, ['compression' => 'lz4'], rw_code($sid, ''))) ?? [];
    rl_same("race ($form, lz4): 100 of 100 keys kept", 100, count($j['data'] ?? []));
}
echo "done\n";
?>
--EXPECT--
ok: lzf/class: phpredis wrote the session
ok: lzf/class: phpredis stored it compressed
ok: lzf/class: redis_lease reads what phpredis wrote
ok: lzf/class: ... and writes it back compressed
ok: lzf/class: phpredis reads what redis_lease wrote
ok: lzf/native: phpredis wrote the session
ok: lzf/native: phpredis stored it compressed
ok: lzf/native: redis_lease reads what phpredis wrote
ok: lzf/native: ... and writes it back compressed
ok: lzf/native: phpredis reads what redis_lease wrote
ok: lzf: rolling deploy, 30 requests alternating between phpredis and redis_lease: each saw all before it
ok: lzf: ... and the session holds all 30 keys
ok: lz4/class: phpredis wrote the session
ok: lz4/class: phpredis stored it compressed
ok: lz4/class: redis_lease reads what phpredis wrote
ok: lz4/class: ... and writes it back compressed
ok: lz4/class: phpredis reads what redis_lease wrote
ok: lz4/native: phpredis wrote the session
ok: lz4/native: phpredis stored it compressed
ok: lz4/native: redis_lease reads what phpredis wrote
ok: lz4/native: ... and writes it back compressed
ok: lz4/native: phpredis reads what redis_lease wrote
ok: lz4: rolling deploy, 30 requests alternating between phpredis and redis_lease: each saw all before it
ok: lz4: ... and the session holds all 30 keys
ok: zstd/class: phpredis wrote the session
ok: zstd/class: phpredis stored it compressed
ok: zstd/class: redis_lease reads what phpredis wrote
ok: zstd/class: ... and writes it back compressed
ok: zstd/class: phpredis reads what redis_lease wrote
ok: zstd/native: phpredis wrote the session
ok: zstd/native: phpredis stored it compressed
ok: zstd/native: redis_lease reads what phpredis wrote
ok: zstd/native: ... and writes it back compressed
ok: zstd/native: phpredis reads what redis_lease wrote
ok: zstd: rolling deploy, 30 requests alternating between phpredis and redis_lease: each saw all before it
ok: zstd: ... and the session holds all 30 keys
ok: race (class, lz4): 100 of 100 keys kept
ok: race (native, lz4): 100 of 100 keys kept
done
