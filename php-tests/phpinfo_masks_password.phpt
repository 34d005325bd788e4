--TEST--
phpinfo() shows the redis_lease module with its DSN, but never the password from redis_lease.dsn
--INI--
redis_lease.dsn=redis://app:Hunter2SecretPW@127.0.0.1:6390/2
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';

/** The lines of the redis_lease section of text-mode phpinfo output. */
function module_section(string $out): string
{
    $start = strpos($out, "\nredis_lease\n");
    if ($start === false) {
        return '';
    }
    // The section ends where the next module's heading starts (a line with
    // a single word after a blank line), or at the end.
    $rest = substr($out, $start + 1);
    if (preg_match('/\n\n([A-Za-z][A-Za-z0-9_ ]*)\n\n/', $rest, $m, PREG_OFFSET_CAPTURE, 20)) {
        $rest = substr($rest, 0, $m[0][1]);
    }
    return $rest;
}

ob_start();
phpinfo(INFO_MODULES);
$out = ob_get_clean();
$section = module_section($out);
rl_ok('phpinfo has a redis_lease section', $section !== '');
rl_ok('the section shows the DSN host and port', str_contains($section, '127.0.0.1:6390'), $section);
$lines = array_filter(explode("\n", $out), fn($l) => str_contains($l, 'Hunter2SecretPW'));
rl_ok('password absent from phpinfo(INFO_MODULES)', $lines === [], implode("\n", $lines));
// Everything but the environment/variables sections: under run-tests the
// -d options (with this DSN) are in the environment of the test process.
ob_start();
phpinfo(INFO_GENERAL | INFO_CONFIGURATION | INFO_MODULES);
$all = ob_get_clean();
rl_ok('password absent from phpinfo(INFO_GENERAL | INFO_CONFIGURATION | INFO_MODULES)', !str_contains($all, 'Hunter2SecretPW'));

// Other DSN forms with a password, in child processes (-d on the command line).
foreach ([
    'OnlyPwSecret1' => 'redis://:OnlyPwSecret1@127.0.0.1:6390',
    'UserPwSecret2' => 'redis://user:UserPwSecret2@127.0.0.1:6390/3?connect_timeout=1',
    'PhpredisSecret3' => 'tcp://127.0.0.1:6390?auth=PhpredisSecret3&database=1',
    'MalformedSecret4' => 'redis://:MalformedSecret4@127.0.0.1:notaport',
    // A userinfo without ':' is a password (Symfony and Predis DSNs), not a user.
    'PwOnlySecret5' => 'redis://PwOnlySecret5@127.0.0.1:6390',
] as $secret => $dsn) {
    $child = rl_spawn_php('phpinfo(INFO_MODULES);', ['redis_lease.dsn' => $dsn]);
    $txt = $child->readAll(10.0);
    $child->wait(5.0);
    $section = module_section($txt);
    rl_ok("child phpinfo has a redis_lease section ($secret form)", $section !== '', substr($txt, 0, 300));
    if ($secret !== 'MalformedSecret4') {
        rl_ok("child section shows the host ($secret form)", str_contains($section, '127.0.0.1'), $section);
    }
    rl_ok("password absent for the $secret form", !str_contains($txt, $secret), $section);
}
echo "done\n";
?>
--EXPECT--
ok: phpinfo has a redis_lease section
ok: the section shows the DSN host and port
ok: password absent from phpinfo(INFO_MODULES)
ok: password absent from phpinfo(INFO_GENERAL | INFO_CONFIGURATION | INFO_MODULES)
ok: child phpinfo has a redis_lease section (OnlyPwSecret1 form)
ok: child section shows the host (OnlyPwSecret1 form)
ok: password absent for the OnlyPwSecret1 form
ok: child phpinfo has a redis_lease section (UserPwSecret2 form)
ok: child section shows the host (UserPwSecret2 form)
ok: password absent for the UserPwSecret2 form
ok: child phpinfo has a redis_lease section (PhpredisSecret3 form)
ok: child section shows the host (PhpredisSecret3 form)
ok: password absent for the PhpredisSecret3 form
ok: child phpinfo has a redis_lease section (MalformedSecret4 form)
ok: password absent for the MalformedSecret4 form
ok: child phpinfo has a redis_lease section (PwOnlySecret5 form)
ok: child section shows the host (PwOnlySecret5 form)
ok: password absent for the PwOnlySecret5 form
done
