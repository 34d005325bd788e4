--TEST--
Sessions compressed as phpredis 6.1+ stores them (lzf, lz4 with phpredis's 5-byte header, zstd frames), class and native forms: written compressed and read back; uncompressed sessions still read (a migration); phpredis's own redis.session.compression in php.ini is honoured when redis_lease.session.compression is unset; data that is neither compressed nor a session, and frames claiming more than the bound, get one warning naming the algorithm and the id's first 6 characters, an empty session, and are never written over; bad settings are a ValueError
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

/** Child code: start $sid, report what it read, apply $change (PHP code), save; reply. */
function rw_code(string $sid, string $change): string
{
    return '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$data = $s["started"] ? $_SESSION : null;
' . $change . '
$w = $s["started"] ? session_write_close() : null;
app_reply($s + ["data" => $data, "write_closed" => $w, "undecodable" => RedisLease\metrics()["session_undecodable"]]);
';
}

function run(string $form, string $dsn, array $options, string $sid, string $change, array $ini = []): array
{
    return st_child_json(st_child($form, $dsn, $options, rw_code($sid, $change), $ini)) ?? [];
}

/** phpredis's CRC-8 (polynomial 0x31, initial 0xFF), as a test oracle of the LZ4 header. */
function crc8(string $bytes): int
{
    $crc = 0xFF;
    foreach (str_split($bytes) as $c) {
        $crc ^= ord($c);
        for ($i = 0; $i < 8; $i++) {
            $crc = $crc & 0x80 ? (($crc << 1) ^ 0x31) & 0xFF : ($crc << 1) & 0xFF;
        }
    }
    return $crc;
}

// A 4 KiB session: compressible, as real ones are.
$blob = str_repeat('{"cart":[1,2,3],"seen":"2026-12-02T10:00:00Z"} ', 85);
$plain = 'blob|' . serialize($blob);

foreach (ST_FORMS as $form) {
    foreach (['lzf', 'lz4', 'zstd'] as $algo) {
        $opts = ['compression' => $algo];
        $sid = st_sid();
        $key = st_data_key($sid);
        $j = run($form, $dsn, $opts, $sid, '$_SESSION["blob"] = ' . var_export($blob, true) . ';');
        rl_same("$form/$algo: written", [true, []], [$j['write_closed'] ?? null, $j['warnings'] ?? null]);
        $stored = (string) $raw->cmd('GET', $key);
        rl_ok("$form/$algo: stored compressed (" . strlen($stored) . ' of ' . strlen($plain) . ' bytes)',
            strlen($stored) < strlen($plain) / 4 && $stored !== $plain);
        $shape = match ($algo) {
            'lz4' => strlen($stored) > 5 && unpack('V', substr($stored, 1, 4))[1] === strlen($plain)
                && ord($stored[0]) === crc8(substr($stored, 1, 4)),
            'zstd' => substr($stored, 0, 4) === "\x28\xb5\x2f\xfd",
            'lzf' => ord($stored[0]) < 32, // a literal run first: LZF has no header
        };
        rl_ok("$form/$algo: in phpredis's format", $shape, bin2hex(substr($stored, 0, 8)));
        $j = run($form, $dsn, $opts, $sid, '$_SESSION["n"] = 1;');
        rl_same("$form/$algo: read back", $blob, $j['data']['blob'] ?? null);

        // Uncompressed data (written before compression was turned on) is read.
        $sid = st_sid();
        $raw->cmd('SET', st_data_key($sid), 'a|i:1;', 'EX', 600);
        $j = run($form, $dsn, $opts, $sid, '$_SESSION["b"] = ' . var_export($blob, true) . ';');
        rl_same("$form/$algo: an uncompressed session is read, without a warning", [['a' => 1], []],
            [$j['data'] ?? null, $j['warnings'] ?? null]);
        rl_ok("$form/$algo: ... and written back compressed", strlen((string) $raw->cmd('GET', st_data_key($sid))) < strlen($plain) / 4);
        $j = run($form, $dsn, $opts, $sid, '');
        rl_same("$form/$algo: ... which read back", ['a' => 1, 'b' => $blob], $j['data'] ?? null);

        // Neither compressed nor a session: one warning, an empty session, kept as it is.
        $sid = st_sid();
        $garbage = "\xF3\x11\x02\x99\x00\x7E\x13\x80";
        $raw->cmd('SET', st_data_key($sid), $garbage, 'EX', 600);
        $j = run($form, $dsn, $opts, $sid, '$_SESSION["x"] = 1;');
        $ours = st_ours($j['warnings'] ?? []);
        rl_same("$form/$algo: undecodable data: one warning", 1, count($ours));
        $w = $ours[0] ?? '';
        rl_ok("$form/$algo: ... naming the algorithm and the id's first 6 characters, no more",
            str_contains($w, $algo) && str_contains($w, substr($sid, 0, 6)) && !str_contains($w, substr($sid, 0, 7)), $w);
        rl_same("$form/$algo: ... the request sees an empty session", [], $j['data'] ?? null);
        rl_same("$form/$algo: ... and the data is not written over", $garbage, $raw->cmd('GET', st_data_key($sid)));
        rl_same("$form/$algo: ... nor left locked", [], st_lock_keys($raw, $sid));
        rl_same("$form/$algo: ... counted (session_undecodable)", 1, $j['undecodable'] ?? null);
    }

    // Frames that claim more than the bound are refused before they are inflated.
    $bombs = [
        'lz4' => chr(crc8(pack('V', 1 << 30))) . pack('V', 1 << 30) . "\x1f\x00\x01\x00",
        // A zstd frame header (single segment, 4-byte content size) claiming 1 GiB.
        'zstd' => "\x28\xb5\x2f\xfd" . "\xa0" . pack('V', 1 << 30) . "\x01\x00\x00",
    ];
    foreach ($bombs as $algo => $bomb) {
        $sid = st_sid();
        $raw->cmd('SET', st_data_key($sid), $bomb, 'EX', 600);
        $t = microtime(true);
        $j = run($form, $dsn, ['compression' => $algo], $sid, '$_SESSION["x"] = 1;');
        $w = st_ours($j['warnings'] ?? [])[0] ?? '';
        rl_ok("$form/$algo: a frame claiming 1 GiB is refused, saying so", str_contains($w, (string) (1 << 30)) && str_contains($w, $algo), $w);
        rl_same("$form/$algo: ... unread and unchanged", [[], $bomb], [$j['data'] ?? null, $raw->cmd('GET', st_data_key($sid))]);
    }

    // phpredis's own setting, when ours is unset (a php.ini as it was with phpredis).
    $sid = st_sid();
    $j = run($form, $dsn, [], $sid, '$_SESSION["blob"] = ' . var_export($blob, true) . ';',
        ['redis.session.compression' => 'lz4']);
    $stored = (string) $raw->cmd('GET', st_data_key($sid));
    rl_ok("$form: redis.session.compression = lz4 (phpredis's setting) compresses", strlen($stored) < strlen($plain) / 4
        && unpack('V', substr($stored, 1, 4))[1] === strlen($plain), bin2hex(substr($stored, 0, 8)));
    $sid = st_sid();
    run($form, $dsn, ['compression' => 'none'], $sid, '$_SESSION["blob"] = ' . var_export($blob, true) . ';',
        ['redis.session.compression' => 'lz4']);
    rl_same("$form: redis_lease.session.compression = none wins over it", $plain, $raw->cmd('GET', st_data_key($sid)));
    // ... read as phpredis reads it: a name by its first letters, a level by its
    // digits (before, a php.ini phpredis took failed every session start).
    $sid = st_sid();
    $j = run($form, $dsn, [], $sid, '$_SESSION["blob"] = ' . var_export($blob, true) . ';',
        ['redis.session.compression' => 'zstd19', 'redis.session.compression_level' => 'high']);
    rl_same("$form: redis.session.compression = zstd19, level high, as phpredis reads them: zstd", [true, "\x28\xb5\x2f\xfd"],
        [$j['write_closed'] ?? null, substr((string) $raw->cmd('GET', st_data_key($sid)), 0, 4)]);

    // Pools set otherwise share sessions during a change: each reads what
    // another wrote, one set to none too (before, it handed the compressed
    // bytes to PHP, which failed to decode them and destroyed the session).
    foreach (['lzf', 'lz4', 'zstd'] as $wrote) {
        foreach (['none', 'lzf', 'lz4', 'zstd'] as $reads) {
            if ($reads === $wrote) {
                continue;
            }
            $sid = st_sid();
            run($form, $dsn, ['compression' => $wrote], $sid, '$_SESSION["blob"] = ' . var_export($blob, true) . ';');
            $j = run($form, $dsn, ['compression' => $reads], $sid, '$_SESSION["n"] = 1;');
            $j2 = run($form, $dsn, ['compression' => $wrote], $sid, '');
            rl_same("$form: $wrote written, read by a pool set to $reads, its write read back by the first",
                [$blob, [], ['blob' => $blob, 'n' => 1]],
                [$j['data']['blob'] ?? null, $j['warnings'] ?? null, $j2['data'] ?? null]);
        }
    }
}

// Bad settings.
rl_throws('class form: compression "gzip" is a ValueError', ValueError::class,
    fn() => new RedisLockingSessionHandler($dsn, ['compression' => 'gzip']));
rl_throws('class form: compression_level "high" is a ValueError', ValueError::class,
    fn() => new RedisLockingSessionHandler($dsn, ['compression' => 'zstd', 'compression_level' => 'high']));
echo "done\n";
?>
--EXPECT--
ok: class/lzf: written
ok: class/lzf: stored compressed (117 of 4010 bytes)
ok: class/lzf: in phpredis's format
ok: class/lzf: read back
ok: class/lzf: an uncompressed session is read, without a warning
ok: class/lzf: ... and written back compressed
ok: class/lzf: ... which read back
ok: class/lzf: undecodable data: one warning
ok: class/lzf: ... naming the algorithm and the id's first 6 characters, no more
ok: class/lzf: ... the request sees an empty session
ok: class/lzf: ... and the data is not written over
ok: class/lzf: ... nor left locked
ok: class/lzf: ... counted (session_undecodable)
ok: class/lz4: written
ok: class/lz4: stored compressed (92 of 4010 bytes)
ok: class/lz4: in phpredis's format
ok: class/lz4: read back
ok: class/lz4: an uncompressed session is read, without a warning
ok: class/lz4: ... and written back compressed
ok: class/lz4: ... which read back
ok: class/lz4: undecodable data: one warning
ok: class/lz4: ... naming the algorithm and the id's first 6 characters, no more
ok: class/lz4: ... the request sees an empty session
ok: class/lz4: ... and the data is not written over
ok: class/lz4: ... nor left locked
ok: class/lz4: ... counted (session_undecodable)
ok: class/zstd: written
ok: class/zstd: stored compressed (79 of 4010 bytes)
ok: class/zstd: in phpredis's format
ok: class/zstd: read back
ok: class/zstd: an uncompressed session is read, without a warning
ok: class/zstd: ... and written back compressed
ok: class/zstd: ... which read back
ok: class/zstd: undecodable data: one warning
ok: class/zstd: ... naming the algorithm and the id's first 6 characters, no more
ok: class/zstd: ... the request sees an empty session
ok: class/zstd: ... and the data is not written over
ok: class/zstd: ... nor left locked
ok: class/zstd: ... counted (session_undecodable)
ok: class/lz4: a frame claiming 1 GiB is refused, saying so
ok: class/lz4: ... unread and unchanged
ok: class/zstd: a frame claiming 1 GiB is refused, saying so
ok: class/zstd: ... unread and unchanged
ok: class: redis.session.compression = lz4 (phpredis's setting) compresses
ok: class: redis_lease.session.compression = none wins over it
ok: class: redis.session.compression = zstd19, level high, as phpredis reads them: zstd
ok: class: lzf written, read by a pool set to none, its write read back by the first
ok: class: lzf written, read by a pool set to lz4, its write read back by the first
ok: class: lzf written, read by a pool set to zstd, its write read back by the first
ok: class: lz4 written, read by a pool set to none, its write read back by the first
ok: class: lz4 written, read by a pool set to lzf, its write read back by the first
ok: class: lz4 written, read by a pool set to zstd, its write read back by the first
ok: class: zstd written, read by a pool set to none, its write read back by the first
ok: class: zstd written, read by a pool set to lzf, its write read back by the first
ok: class: zstd written, read by a pool set to lz4, its write read back by the first
ok: native/lzf: written
ok: native/lzf: stored compressed (117 of 4010 bytes)
ok: native/lzf: in phpredis's format
ok: native/lzf: read back
ok: native/lzf: an uncompressed session is read, without a warning
ok: native/lzf: ... and written back compressed
ok: native/lzf: ... which read back
ok: native/lzf: undecodable data: one warning
ok: native/lzf: ... naming the algorithm and the id's first 6 characters, no more
ok: native/lzf: ... the request sees an empty session
ok: native/lzf: ... and the data is not written over
ok: native/lzf: ... nor left locked
ok: native/lzf: ... counted (session_undecodable)
ok: native/lz4: written
ok: native/lz4: stored compressed (92 of 4010 bytes)
ok: native/lz4: in phpredis's format
ok: native/lz4: read back
ok: native/lz4: an uncompressed session is read, without a warning
ok: native/lz4: ... and written back compressed
ok: native/lz4: ... which read back
ok: native/lz4: undecodable data: one warning
ok: native/lz4: ... naming the algorithm and the id's first 6 characters, no more
ok: native/lz4: ... the request sees an empty session
ok: native/lz4: ... and the data is not written over
ok: native/lz4: ... nor left locked
ok: native/lz4: ... counted (session_undecodable)
ok: native/zstd: written
ok: native/zstd: stored compressed (79 of 4010 bytes)
ok: native/zstd: in phpredis's format
ok: native/zstd: read back
ok: native/zstd: an uncompressed session is read, without a warning
ok: native/zstd: ... and written back compressed
ok: native/zstd: ... which read back
ok: native/zstd: undecodable data: one warning
ok: native/zstd: ... naming the algorithm and the id's first 6 characters, no more
ok: native/zstd: ... the request sees an empty session
ok: native/zstd: ... and the data is not written over
ok: native/zstd: ... nor left locked
ok: native/zstd: ... counted (session_undecodable)
ok: native/lz4: a frame claiming 1 GiB is refused, saying so
ok: native/lz4: ... unread and unchanged
ok: native/zstd: a frame claiming 1 GiB is refused, saying so
ok: native/zstd: ... unread and unchanged
ok: native: redis.session.compression = lz4 (phpredis's setting) compresses
ok: native: redis_lease.session.compression = none wins over it
ok: native: redis.session.compression = zstd19, level high, as phpredis reads them: zstd
ok: native: lzf written, read by a pool set to none, its write read back by the first
ok: native: lzf written, read by a pool set to lz4, its write read back by the first
ok: native: lzf written, read by a pool set to zstd, its write read back by the first
ok: native: lz4 written, read by a pool set to none, its write read back by the first
ok: native: lz4 written, read by a pool set to lzf, its write read back by the first
ok: native: lz4 written, read by a pool set to zstd, its write read back by the first
ok: native: zstd written, read by a pool set to none, its write read back by the first
ok: native: zstd written, read by a pool set to lzf, its write read back by the first
ok: native: zstd written, read by a pool set to lz4, its write read back by the first
ok: class form: compression "gzip" is a ValueError
ok: class form: compression_level "high" is a ValueError
done
