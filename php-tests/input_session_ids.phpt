--TEST--
Bad input: session ids with invalid characters or over 256 characters (class and native forms, with and without strict mode) fail session_start() or are replaced by PHP; no Redis key outside the session prefix is ever created
--FILE--
<?php
/*
 * Each bad id is given with session_id() before session_start(), in a CLI
 * child of each form. Accepted outcomes: session_start() returns false with a
 * redis_lease warning, or PHP itself refuses the id and starts the session
 * under a fresh valid id. Never an exception or a crash; our warnings show at
 * most the id's first 6 characters. After every bad id a normal session
 * starts and writes in the same process. At the end, every key in Redis must
 * be under the session prefix and no key may contain a bad id.
 */
require __DIR__ . '/fpm-app/harness.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// Every bad id carries the marker "Qz9Xw", so a key made from one is easy to find.
const MK = 'Qz9Xw';
$bad = [
    'space' => MK . ' spaced',
    'slash and dots' => '../../' . MK . '/etc',
    'NUL byte' => MK . "\0nul",
    'only NUL' => "\0",
    'invalid UTF-8' => MK . "\xff\xfe",
    'valid UTF-8, not ASCII' => MK . 'é🔒',
    'braces' => MK . '{slot}',
    'colon' => MK . ':x',
    'glob chars' => MK . '*?[a]',
    'CR LF' => MK . "\r\nSET x 1",
    'tab' => MK . "\tt",
    'quotes and angle brackets' => MK . '\'"<>',
    'semicolon' => MK . ';x',
    'dot' => MK . '.x',
    'underscore' => MK . '_x',
    'percent' => MK . '%00',
    'plus' => MK . '+x',
    '257 chars' => MK . str_repeat('a', 252),
    '300 chars' => MK . str_repeat('b', 295),
    '100000 chars' => MK . str_repeat('c', 99995),
];
$valid256 = MK . str_repeat('d', 251); // 256 characters of the alphabet: must work
// It exists already, so strict mode keeps it too.
$raw->cmd('SET', ST_PREFIX . $valid256, '', 'EX', 600);

$code = '
if ($mode === "class") {
    session_set_save_handler(new RedisLockingSessionHandler($_SERVER["RL_DSN"]), true);
}
$ids = ' . var_export($bad + ['valid 256 chars' => $valid256], true) . ';
$connects = null;
$out = [];
foreach ($ids as $label => $id) {
    $GLOBALS["app_warnings"] = [];
    $r = ["label" => $label, "exception" => null, "started" => null, "written" => null];
    try {
        session_id($id);
        $r["started"] = session_start();
        $r["sid_after_hex"] = bin2hex(session_id());
        if ($r["started"]) {
            $_SESSION["from"] = $label;
            $r["written"] = session_write_close();
        }
    } catch (Throwable $e) {
        $r["exception"] = get_class($e) . ": " . $e->getMessage();
        if (session_status() === PHP_SESSION_ACTIVE) {
            session_abort();
        }
    }
    $r["warnings"] = app_warning_messages();
    // A normal session right after the bad one, in the same process.
    $GLOBALS["app_warnings"] = [];
    $good = bin2hex(random_bytes(16));
    try {
        session_id($good);
        $ok = session_start();
        $good = session_id(); // strict mode replaces an unknown id: keep the one in use
        $_SESSION["good"] = 1;
        $ok = $ok && session_write_close();
    } catch (Throwable $e) {
        $ok = get_class($e) . ": " . $e->getMessage();
    }
    $r["good"] = ["id" => $good, "ok" => $ok, "warnings" => app_warning_messages()];
    $m = RedisLease\metrics();
    $r["connects"] = $m["connects"];
    $out[] = $r;
}
echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE), "\n";
';

/** "ok: $label" when $fails is empty, else "FAIL: $label" and each failure (up to 12) on its own line. */
function none_failed(string $label, array $fails): void
{
    $more = count($fails) > 12 ? "\n    ... and " . (count($fails) - 12) . ' more' : '';
    rl_ok($label, $fails === [], count($fails) . " failure(s):\n    " . implode("\n    ", array_slice($fails, 0, 12)) . $more);
}

/** Failures of the 6-character rule: warnings of ours that show 7+ characters of $id in a row. */
function shows_too_much(array $ours, string $id): array
{
    $hits = [];
    for ($i = 0; $i + 7 <= strlen($id); $i++) {
        $window = substr($id, $i, 7);
        foreach ($ours as $w) {
            if (str_contains($w, $window)) {
                $hits[] = "'$window' in: $w";
                break 2;
            }
        }
    }
    return $hits;
}

$goodIds = [];
foreach (ST_FORMS as $form) {
    foreach (['0', '1'] as $strict) {
        $what = "$form form, use_strict_mode=$strict";
        $child = st_child($form, $dsn, [], $code, ['session.use_strict_mode' => $strict, 'memory_limit' => '256M']);
        $line = $child->readLine(30.0);
        $child->wait(10.0);
        $results = json_decode((string) $line, true);
        if (!is_array($results)) {
            rl_ok("$what: the child reported", false, rl_fmt($line) . "\n" . $child->transcript);
            continue;
        }
        $fails = [];
        $leaks = [];
        $goodFails = [];
        $connects = [];
        foreach ($results as $r) {
            $label = $r['label'];
            $connects[] = $r['connects'];
            if ($r['good']['ok'] !== true) {
                $goodFails[] = "after '$label': " . json_encode($r['good']);
            }
            $goodIds[] = $r['good']['id'];
            if ($label === 'valid 256 chars') {
                rl_same("$what: a valid 256-character id starts and writes", [true, true], [$r['started'], $r['written']]);
                rl_same("$what: ... under its own id", bin2hex($valid256), $r['sid_after_hex'] ?? null);
                continue;
            }
            $id = $bad[$label];
            $ours = array_values(array_filter($r['warnings'], static fn($w) => str_contains($w, 'redis_lease:')));
            $after = hex2bin($r['sid_after_hex'] ?? '') ?: '';
            $refusedByUs = $r['started'] === false && $ours !== [] && stripos(implode(' ', $ours), 'invalid session id') !== false;
            $replacedByPhp = $r['started'] === true && $r['written'] === true && $after !== $id
                && preg_match('/^[a-zA-Z0-9,-]{22,256}$/', $after) === 1;
            if ($r['exception'] !== null) {
                $fails[] = "'$label': exception " . $r['exception'];
            } elseif (!$refusedByUs && !$replacedByPhp) {
                $fails[] = "'$label': started=" . rl_fmt($r['started']) . ', written=' . rl_fmt($r['written'])
                    . ', id after=' . rl_fmt($after) . ', warnings=' . json_encode($r['warnings']);
            }
            if ($replacedByPhp) {
                $goodIds[] = $after;
            }
            foreach (shows_too_much($ours, $id) as $hit) {
                $leaks[] = "'$label': $hit";
            }
        }
        none_failed("$what: every bad id failed session_start() with our warning or was replaced by PHP, no exception", $fails);
        none_failed("$what: our warnings never show more than 6 characters of an id", $leaks);
        none_failed("$what: a normal session worked right after each bad id", $goodFails);
        rl_same("$what: ... all on one connection", 1, count(array_unique($connects)));
    }
}

$keys = $raw->cmd('KEYS', '*');
$outside = array_values(array_filter($keys, static fn($k) => !str_starts_with($k, ST_PREFIX) && !str_starts_with($k, '{' . ST_PREFIX)));
none_failed('every key in Redis is under PHPREDIS_SESSION: or {PHPREDIS_SESSION:', $outside);
$fromBad = array_values(array_filter($keys, static fn($k) => str_contains($k, MK) && $k !== ST_PREFIX . $valid256));
none_failed('no key was made from a bad id', $fromBad);
$missing = array_values(array_filter(array_unique($goodIds), static fn($id) => $raw->cmd('EXISTS', ST_PREFIX . $id) !== 1));
none_failed('every good session (and every id PHP replaced a bad one with) has its data key', $missing);
rl_same('the valid 256-character id has its data key', 1, $raw->cmd('EXISTS', ST_PREFIX . $valid256));
$locks = array_values(array_filter($keys, static fn($k) => str_ends_with($k, '}:lock')));
none_failed('no session lock is left', $locks);
echo "done\n";
?>
--EXPECT--
ok: class form, use_strict_mode=0: a valid 256-character id starts and writes
ok: class form, use_strict_mode=0: ... under its own id
ok: class form, use_strict_mode=0: every bad id failed session_start() with our warning or was replaced by PHP, no exception
ok: class form, use_strict_mode=0: our warnings never show more than 6 characters of an id
ok: class form, use_strict_mode=0: a normal session worked right after each bad id
ok: class form, use_strict_mode=0: ... all on one connection
ok: class form, use_strict_mode=1: a valid 256-character id starts and writes
ok: class form, use_strict_mode=1: ... under its own id
ok: class form, use_strict_mode=1: every bad id failed session_start() with our warning or was replaced by PHP, no exception
ok: class form, use_strict_mode=1: our warnings never show more than 6 characters of an id
ok: class form, use_strict_mode=1: a normal session worked right after each bad id
ok: class form, use_strict_mode=1: ... all on one connection
ok: native form, use_strict_mode=0: a valid 256-character id starts and writes
ok: native form, use_strict_mode=0: ... under its own id
ok: native form, use_strict_mode=0: every bad id failed session_start() with our warning or was replaced by PHP, no exception
ok: native form, use_strict_mode=0: our warnings never show more than 6 characters of an id
ok: native form, use_strict_mode=0: a normal session worked right after each bad id
ok: native form, use_strict_mode=0: ... all on one connection
ok: native form, use_strict_mode=1: a valid 256-character id starts and writes
ok: native form, use_strict_mode=1: ... under its own id
ok: native form, use_strict_mode=1: every bad id failed session_start() with our warning or was replaced by PHP, no exception
ok: native form, use_strict_mode=1: our warnings never show more than 6 characters of an id
ok: native form, use_strict_mode=1: a normal session worked right after each bad id
ok: native form, use_strict_mode=1: ... all on one connection
ok: every key in Redis is under PHPREDIS_SESSION: or {PHPREDIS_SESSION:
ok: no key was made from a bad id
ok: every good session (and every id PHP replaced a bad one with) has its data key
ok: the valid 256-character id has its data key
ok: no session lock is left
done
