--TEST--
Bad input: 50 MiB of session data (class and native forms) is written and read back byte for byte, with no warning and no lock left behind
--FILE--
<?php
/*
 * One CLI child writes a session holding 50 MiB of random bytes, another
 * reads it back. Compared: the SHA-1 of the encoded session (as PHP passes it
 * to the handler) with the SHA-1 of the value in Redis, and the SHA-1 of the
 * blob read back with the one written. memory_limit is 512M: enough for the
 * blob, its encoded form and PHP's copies, far below the machine's memory.
 */
require __DIR__ . '/fpm-app/harness.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port'], 20.0);
$dsn = $srv['dsn'];
const BYTES = 50 * 1024 * 1024;
$ini = ['memory_limit' => '512M'];

foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $writer = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$blob = random_bytes(' . BYTES . ');
$_SESSION["blob"] = $blob;
$_SESSION["n"] = 1;
$enc = session_encode();
$t = microtime(true);
$w = session_write_close();
app_reply($s + ["written" => $w, "write_s" => microtime(true) - $t, "enc_sha1" => sha1($enc),
    "enc_len" => strlen($enc), "blob_sha1" => sha1($blob)]);
', $ini);
    $w = st_child_json($writer, 60.0) ?? [];
    $writer->wait(10.0);
    rl_same("$form: writer started the session", true, $w['started'] ?? null);
    rl_same("$form: writer's session_write_close() is true", true, $w['written'] ?? null);
    rl_same("$form: writer had no warnings", [], $w['warnings'] ?? null);
    $stored = $raw->cmd('GET', st_data_key($sid));
    rl_same("$form: Redis holds the encoded session, same length", $w['enc_len'] ?? null, is_string($stored) ? strlen($stored) : $stored);
    rl_same("$form: ... and the same bytes (SHA-1)", $w['enc_sha1'] ?? null, is_string($stored) ? sha1($stored) : null);
    unset($stored);
    rl_ok("$form: the stored value is more than 50 MiB", ($w['enc_len'] ?? 0) > BYTES, rl_fmt($w['enc_len'] ?? null));
    rl_same("$form: no lock left after the write", [], st_lock_keys($raw, $sid));

    $reader = st_child($form, $dsn, [], '
$s = app_session_start($mode, ' . var_export($sid, true) . ');
$blob = $_SESSION["blob"] ?? "";
app_reply($s + ["blob_len" => strlen($blob), "blob_sha1" => sha1($blob), "n" => $_SESSION["n"] ?? null,
    "closed" => session_write_close()]);
', $ini);
    $r = st_child_json($reader, 60.0) ?? [];
    $reader->wait(10.0);
    rl_same("$form: reader started the session", true, $r['started'] ?? null);
    rl_same("$form: reader got 50 MiB back", BYTES, $r['blob_len'] ?? null);
    rl_same("$form: ... identical to what was written (SHA-1)", $w['blob_sha1'] ?? 'writer', $r['blob_sha1'] ?? 'reader');
    rl_same("$form: ... with the other value", 1, $r['n'] ?? null);
    rl_same("$form: reader's session_write_close() is true", true, $r['closed'] ?? null);
    rl_same("$form: reader had no warnings", [], $r['warnings'] ?? null);
    rl_same("$form: no lock left after the read", [], st_lock_keys($raw, $sid));
    $raw->cmd('DEL', st_data_key($sid));
}
echo "done\n";
?>
--EXPECT--
ok: class: writer started the session
ok: class: writer's session_write_close() is true
ok: class: writer had no warnings
ok: class: Redis holds the encoded session, same length
ok: class: ... and the same bytes (SHA-1)
ok: class: the stored value is more than 50 MiB
ok: class: no lock left after the write
ok: class: reader started the session
ok: class: reader got 50 MiB back
ok: class: ... identical to what was written (SHA-1)
ok: class: ... with the other value
ok: class: reader's session_write_close() is true
ok: class: reader had no warnings
ok: class: no lock left after the read
ok: native: writer started the session
ok: native: writer's session_write_close() is true
ok: native: writer had no warnings
ok: native: Redis holds the encoded session, same length
ok: native: ... and the same bytes (SHA-1)
ok: native: the stored value is more than 50 MiB
ok: native: no lock left after the write
ok: native: reader started the session
ok: native: reader got 50 MiB back
ok: native: ... identical to what was written (SHA-1)
ok: native: ... with the other value
ok: native: reader's session_write_close() is true
ok: native: reader had no warnings
ok: native: no lock left after the read
done
