--TEST--
Security under php-fpm: the pool's PHP error log and fpm log never hold a password (pool redis_lease.dsn, class-form DSNs, wrong passwords, unreachable, timeouts, uncaught exceptions) nor more than 6 characters of a session id; phpinfo() shows the DSN masked
--CONFLICTS--
fpm
--FILE--
<?php
/*
 * A php-fpm pool whose workers log errors to a file (display_errors=0, as in
 * production, and zend.exception_ignore_args=1 so PHP itself prints no call
 * arguments in traces). The pool's redis_lease.dsn (php_admin_value) has a
 * wrong password in phpredis's auth[] form and session.save_path is empty, so
 * PHP's own "Failed to read session data: redis_lease (path: )" has nothing to
 * show. The app (fpm-app/security_app.php) has no error handler: its warnings
 * and uncaught exceptions all land in the logs, which are then searched for
 * every secret and every session id.
 */
require __DIR__ . '/fpm-app/harness.inc';

$realPw = 'FpmRealServerPw' . bin2hex(random_bytes(4));
$alicePw = 'FpmAlicePw' . bin2hex(random_bytes(4));
$srv = rl_start_redis(['--requirepass', $realPw], $realPw);
$raw = new RlRaw($srv['port']);
$raw->cmd('AUTH', $realPw);
$raw->cmd('ACL', 'SETUSER', 'alice', 'on', '>' . $alicePw, '~*', '+@all');
$p = $srv['port'];
$goodDsn = "redis://alice:$alicePw@127.0.0.1:$p";
$closed = rl_free_port();
$blackhole = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
$bhPort = (int) substr(strrchr(stream_socket_get_name($blackhole, false), ':'), 1);

$poolSecret = 'FpmPoolSecretQ7';
$pool = FpmPool::start([
    'ini' => st_common_ini() + [
        'session.save_handler' => 'redis_lease',
        'session.save_path' => '',
        'zend.exception_ignore_args' => '1',
    ],
    'admin' => ['redis_lease.dsn' => "tcp://127.0.0.1:$p?auth[]=alice&auth[]=$poolSecret"],
    'max_children' => 2,
]);
$app = __DIR__ . '/fpm-app/security_app.php';
$bodies = '';
$sids = [];

/** One request; returns the response (its body and stderr are searched too). */
function call(FpmPool $pool, string $app, array $query, ?string $dsn = null): FcgiResponse
{
    $r = $pool->client()->request(FcgiClient::params($app, $query, $dsn === null ? [] : ['RL_DSN' => $dsn]), '', 20.0);
    $GLOBALS['bodies'] .= $r->stdout . $r->stderr;
    return $r;
}

// 1. The native handler with the pool's DSN (wrong password): a failed session.
$sid = st_sid();
$sids[] = $sid;
call($pool, $app, ['what' => 'native_session', 'sid' => $sid]);

// 2. The class form and DistributedLock with wrong passwords, nothing listening, a timeout.
$failing = [
    'WrongPwFpmA1' => "redis://:WrongPwFpmA1@127.0.0.1:$p",
    'WrongPwFpmB1' => "redis://alice:WrongPwFpmB1@127.0.0.1:$p/2",
    'WrongPwFpmC1' => "tcp://127.0.0.1:$p?auth=WrongPwFpmC1",
    'WrongPwFpmD1' => "tcp://127.0.0.1:$p?auth[]=alice&auth[]=WrongPwFpmD1",
    'RefusedFpmE1' => "redis://:RefusedFpmE1@127.0.0.1:$closed",
    'SilentFpmF1' => "redis://:SilentFpmF1@127.0.0.1:$bhPort?read_timeout=0.3",
];
foreach ($failing as $secret => $dsn) {
    $sid = st_sid();
    $sids[] = $sid;
    call($pool, $app, ['what' => 'class_session', 'sid' => $sid], $dsn);
    call($pool, $app, ['what' => 'lock_dsn'], $dsn);
}
// 3. DistributedLock with the pool's ini DSN: an uncaught ConnectionException.
call($pool, $app, ['what' => 'lock_ini']);

// 4. Warnings of ours that name a session id: write before read, an over-long id.
$unopened = st_sid();
call($pool, $app, ['what' => 'write_destroyed', 'sid' => $unopened], $goodDsn);
$longId = '';
for ($i = 0; $i < 300; $i++) {
    $longId .= 'abcdefghijklmnopqrstuvwxyz0123456789'[random_int(0, 35)];
}
call($pool, $app, ['what' => 'class_session', 'sid' => $longId], $goodDsn);
// The right password, used successfully: a working session and lock.
$okSid = st_sid();
$sids[] = $okSid;
$r = call($pool, $app, ['what' => 'class_session', 'sid' => $okSid], $goodDsn);
rl_same('with the right ACL password the session works', "session done\n", $r->body);
rl_ok('... and stored its data', is_string($raw->cmd('GET', st_data_key($okSid))));

// 5. A malformed DSN with a '/' left unencoded in the password: uncaught ValueError.
call($pool, $app, ['what' => 'lock_dsn'], "redis://app:SlashPartFpm1/SlashPartFpm2@127.0.0.1:$p");

// 6. phpinfo() over FastCGI.
$info = call($pool, $app, ['what' => 'phpinfo']);
rl_ok('phpinfo(): has the redis_lease section', str_contains($info->body, 'redis_lease support'), substr($info->body, 0, 200));
rl_ok('phpinfo(): shows the pool DSN masked, with its host', str_contains($info->body, "127.0.0.1:$p")
    && str_contains($info->body, '***'), '');
rl_ok('phpinfo(): no trace of the pool secret', !str_contains($info->body, $poolSecret));

// Everything the pool wrote: PHP's error log, fpm's log (workers' stderr), the responses.
// (PHP appends to its error log during the request, so it is complete once the
// response has arrived; stop() would remove the files.)
$logs = $pool->logs();
$all = $logs . $bodies;
rl_ok('the logs hold our warnings (the checks below are not vacuous)', str_contains($logs, 'redis_lease:'), substr($logs, 0, 500));
rl_ok('the logs hold the uncaught ConnectionException', str_contains($logs, 'RedisLease\ConnectionException'), substr($logs, 0, 500));
rl_ok('the logs hold the warning naming the destroyed session (by its 6-character prefix)',
    str_contains($logs, substr($unopened, 0, 6)) && str_contains($logs, 'destroyed in this request'), substr($logs, 0, 500));
rl_ok('the logs hold the warning about the over-long id', stripos($logs, 'invalid session id') !== false, substr($logs, 0, 500));

/** Lines of $text that contain any of $needles. */
function lines_with(string $text, array $needles): array
{
    return array_values(array_filter(explode("\n", $text), static function (string $l) use ($needles): bool {
        foreach ($needles as $n) {
            if (str_contains($l, $n)) {
                return true;
            }
        }
        return false;
    }));
}
rl_same('no trace of the pool redis_lease.dsn password', [], lines_with($all, [$poolSecret]));
rl_same('no trace of the wrong passwords given to the class form and DistributedLock', [], lines_with($all, array_keys($failing)));
rl_same('no trace of the right ACL password or the server password', [], lines_with($all, [$alicePw, $realPw]));
rl_same('no part of a malformed DSN\'s password', [], lines_with($all, ['SlashPartFpm1', 'SlashPartFpm2']));

// Session ids: never more than 6 characters in a row of any id.
$windows = [];
foreach (array_merge($sids, [$unopened, $longId]) as $id) {
    for ($i = 0; $i + 7 <= strlen($id); $i++) {
        $windows[] = substr($id, $i, 7);
    }
}
rl_same('no session id shows with more than 6 characters', [], lines_with($logs, $windows));
echo "done\n";
?>
--EXPECT--
ok: with the right ACL password the session works
ok: ... and stored its data
ok: phpinfo(): has the redis_lease section
ok: phpinfo(): shows the pool DSN masked, with its host
ok: phpinfo(): no trace of the pool secret
ok: the logs hold our warnings (the checks below are not vacuous)
ok: the logs hold the uncaught ConnectionException
ok: the logs hold the warning naming the destroyed session (by its 6-character prefix)
ok: the logs hold the warning about the over-long id
ok: no trace of the pool redis_lease.dsn password
ok: no trace of the wrong passwords given to the class form and DistributedLock
ok: no trace of the right ACL password or the server password
ok: no part of a malformed DSN's password
ok: no session id shows with more than 6 characters
done
