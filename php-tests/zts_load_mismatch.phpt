--TEST--
Threads: a build of the other flavour is refused at load by PHP's own check, naming both builds: this ZTS build in Debian's NTS PHP, and the host's NTS build in this ZTS PHP (ext/weaken-zend.php: without it, dlopen() fails first on an undefined symbol that names neither)
--SKIPIF--
<?php
if (!PHP_ZTS) die('skip needs a ZTS PHP (the php8.2-zts cell of scripts/cells.sh)');
if (!is_executable('/usr/bin/php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION)) die('skip needs Debian\'s NTS php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION);
?>
--FILE--
<?php
require __DIR__ . '/../testing/fpm_pool.php'; // FpmPool::extensionPath(), redis.inc

/** Loads $so into PHP binary $php: [loaded?, what PHP said at startup]. */
function load(string $php, string $so): array
{
    $out = [];
    exec(escapeshellarg($php) . ' -n -d display_startup_errors=1 -d ' . escapeshellarg("extension=$so")
        . ' -r ' . escapeshellarg('echo extension_loaded("redis_lease") ? "LOADED" : "NOT LOADED";') . ' 2>&1', $out, $status);
    $text = implode("\n", $out);
    return [str_contains($text, 'NOT LOADED') ? false : (str_contains($text, 'LOADED') ? true : null), $text, $status];
}

$api = PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION;
$so = FpmPool::extensionPath();
$nts = "/usr/bin/php$api";

[$loaded, $said, $status] = load($nts, $so);
rl_same("this ZTS build in Debian's NTS PHP $api: not loaded", false, $loaded);
rl_ok('PHP named both builds (TS: the module, NTS: PHP)', (bool) preg_match('/Module compiled with build ID=API\d+,TS\b.*\n.*PHP\s+compiled with build ID=API\d+,NTS\b/s', $said), $said);
rl_same('and went on (a warning, not a crash)', 0, $status);

// The host's NTS build of the same PHP version (scripts/cells.sh copies it in and names it here).
$foreign = (string) getenv('RL_NTS_SO');
rl_ok('an NTS build is given (RL_NTS_SO)', $foreign !== '' && is_file($foreign), "RL_NTS_SO='$foreign'");
[$loaded, $said, $status] = load(PHP_BINARY, $foreign);
rl_same("the host's NTS build in this ZTS PHP: not loaded", false, $loaded);
rl_ok('PHP named both builds (NTS: the module, TS: PHP)', (bool) preg_match('/Module compiled with build ID=API\d+,NTS\b.*\n.*PHP\s+compiled with build ID=API\d+,TS\b/s', $said), $said);
rl_same('and went on', 0, $status);
?>
--EXPECTF--
ok: this ZTS build in Debian's NTS PHP %s: not loaded
ok: PHP named both builds (TS: the module, NTS: PHP)
ok: and went on (a warning, not a crash)
ok: an NTS build is given (RL_NTS_SO)
ok: the host's NTS build in this ZTS PHP: not loaded
ok: PHP named both builds (NTS: the module, TS: PHP)
ok: and went on
