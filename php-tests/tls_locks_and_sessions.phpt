--TEST--
TLS: DistributedLock and both session forms over TLS (rediss://, phpredis's tls://?stream[...] save_path, an ACL user in every form), the seeds' 100-request race on php-fpm over TLS, and every certificate problem (wrong CA, host name, expired, no client certificate) a ConnectionException or session warning naming the reason, within the connect timeout
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

$pki = rl_pki();
$ca = "$pki/ca.pem";
$acl = ['--user', 'app', 'on', '>s3cret', '~*', '&*', '+@all'];
$srv = rl_start_redis_tls('server', false, $acl);
$mtls = rl_start_redis_tls('server', true);
$wronghost = rl_start_redis_tls('wronghost');
$expired = rl_start_redis_tls('expired');
$raw = new RlRaw($srv['port']);
$tp = $srv['tls_port'];
$tls = "rediss://localhost:$tp?cafile=$ca";
$forms = [
    'rediss://' => $tls,
    'rediss:// as ACL user' => "rediss://app:s3cret@localhost:$tp?cafile=$ca",
    "phpredis's tls:// with auth[] and stream[]" => "tls://localhost:$tp?auth[]=app&auth[]=s3cret&stream[cafile]=$ca",
    'mutual TLS' => "rediss://localhost:{$mtls['tls_port']}?cafile=$ca&cert=$pki/client.pem&key=$pki/client.key",
];

// --- Locks ---
foreach ($forms as $label => $dsn) {
    $k = rl_key('tls');
    $l = new DistributedLock($k, 5.0, $dsn);
    $r = fault_outcome(fn() => [$l->acquire(), $l->getFencingToken() > 0, $l->release()]);
    rl_same("lock, $label: acquire, fence, release", [true, true, true], $r['value'] ?? $r['message']);
}
$clients = $raw->cmd('CLIENT', 'LIST');
rl_ok('the ACL user\'s links are authenticated as app', str_contains($clients, 'user=app'), $clients);

$refusals = [
    'a CA that signed nothing' => ["rediss://:hunter2@localhost:$tp?timeout=1&cafile=$pki/other-ca.pem", 'UnknownIssuer'],
    'the system roots (no cafile)' => ["rediss://:hunter2@localhost:$tp?timeout=1", 'UnknownIssuer'],
    'a certificate for another host' => ["rediss://:hunter2@localhost:{$wronghost['tls_port']}?timeout=1&cafile=$ca", 'not valid for name'],
    'an expired certificate' => ["tls://localhost:{$expired['tls_port']}?timeout=1&auth=hunter2&stream[cafile]=$ca", 'expired'],
    'no client certificate (mutual TLS)' => ["rediss://:hunter2@localhost:{$mtls['tls_port']}?timeout=1&cafile=$ca", 'TLS'],
];
foreach ($refusals as $label => [$dsn, $reason]) {
    $t = microtime(true);
    $r = fault_outcome(fn() => (new DistributedLock(rl_key('refused'), 5.0, $dsn))->acquire());
    $took = microtime(true) - $t;
    rl_same("refused, $label: ConnectionException", RedisLease\ConnectionException::class, $r['exception']);
    rl_ok("refused, $label: ... naming the reason ($reason), not the password",
        str_contains((string) $r['message'], $reason) && !str_contains((string) $r['message'], 'hunter2'),
        (string) $r['message']);
    rl_ok("refused, $label: ... within the connect timeout", $took < 1.5, sprintf('%.2f s', $took));
}
foreach (['verify_peer_name=0, another host\'s certificate' => "rediss://localhost:{$wronghost['tls_port']}?cafile=$ca&verify_peer_name=0",
          'verify_peer=0, an expired certificate' => "rediss://localhost:{$expired['tls_port']}?verify_peer=0",
          'stream[verify_peer]=0, no cafile' => "tls://localhost:$tp?stream[verify_peer]=0"] as $label => $dsn) {
    $l = new DistributedLock(rl_key('optout'), 5.0, $dsn);
    rl_same("explicit opt-out works: $label", [true, true], [$l->acquire(), $l->release()]);
}

// --- Sessions, class and native, each DSN form ---
foreach (ST_FORMS as $form) {
    foreach ($forms as $label => $dsn) {
        $c = new FaultSessionChild($form, $dsn, ['lock_wait' => 2]);
        $sid = st_sid();
        $j = $c->step('start', ['sid' => $sid]);
        $c->step('set', ['values' => ['via' => $label]]);
        $w = $c->step('write');
        $server = str_contains($dsn, (string) $mtls['tls_port']) ? new RlRaw($mtls['port']) : $raw;
        rl_same("$form session, $label: started, written, no warning", [true, [], ['via' => $label]],
            [$j['started'] ?? null, array_merge($j['warnings'] ?? [], $w['warnings'] ?? []), st_decode($server->cmd('GET', st_data_key($sid)))]);
        $c->finish();
    }
    $c = new FaultSessionChild($form, $refusals['a CA that signed nothing'][0], []);
    $j = $c->step('start', ['sid' => st_sid()]);
    rl_same("$form session, wrong CA: session_start() fails", false, $j['started'] ?? null);
    // (PHP's own "Failed to read session data" warning prints session.save_path:
    // the README says to keep passwords in redis_lease.dsn for that reason.)
    rl_ok("$form session, wrong CA: ... with our warning naming the TLS reason, not the password",
        st_has_warning(st_ours($j['warnings'] ?? []), 'UnknownIssuer') && st_leaks(st_ours($j['warnings'] ?? []), 'hunter2') === [],
        json_encode($j['warnings'] ?? null));
    $c->finish();
}

// --- The seeds' race over TLS: 100 concurrent requests, one session, both forms ---
foreach (ST_FORMS as $form) {
    $dsn = $form === 'native' ? $forms["phpredis's tls:// with auth[] and stream[]"] : $tls;
    $pool = st_pool($form, $dsn, []);
    $sid = st_sid();
    $reqs = [];
    for ($i = 0; $i < 100; $i++) {
        $reqs[$i] = st_req($form, $dsn, [], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 1]);
    }
    $t = microtime(true);
    $rs = $pool->client()->multi($reqs, 60.0);
    $wall = microtime(true) - $t;
    $started = count(array_filter($rs, static fn($r) => ($r->json()['started'] ?? null) === true));
    $data = st_decode($raw->cmd('GET', st_data_key($sid)));
    printf("info: %s, TLS race: %.3f s\n", $form, $wall);
    rl_same("$form, TLS race: 100 sessions started", 100, $started);
    rl_same("$form, TLS race: 100 of 100 keys kept", 100, is_array($data) ? count($data) : 0);
    rl_same("$form, TLS race: nothing in PHP's error log", '', $pool->phpErrors());
    $pool->stop();
}
echo "done\n";
?>
--EXPECTF--
ok: lock, rediss://: acquire, fence, release
ok: lock, rediss:// as ACL user: acquire, fence, release
ok: lock, phpredis's tls:// with auth[] and stream[]: acquire, fence, release
ok: lock, mutual TLS: acquire, fence, release
ok: the ACL user's links are authenticated as app
ok: refused, a CA that signed nothing: ConnectionException
ok: refused, a CA that signed nothing: ... naming the reason (UnknownIssuer), not the password
ok: refused, a CA that signed nothing: ... within the connect timeout
ok: refused, the system roots (no cafile): ConnectionException
ok: refused, the system roots (no cafile): ... naming the reason (UnknownIssuer), not the password
ok: refused, the system roots (no cafile): ... within the connect timeout
ok: refused, a certificate for another host: ConnectionException
ok: refused, a certificate for another host: ... naming the reason (not valid for name), not the password
ok: refused, a certificate for another host: ... within the connect timeout
ok: refused, an expired certificate: ConnectionException
ok: refused, an expired certificate: ... naming the reason (expired), not the password
ok: refused, an expired certificate: ... within the connect timeout
ok: refused, no client certificate (mutual TLS): ConnectionException
ok: refused, no client certificate (mutual TLS): ... naming the reason (TLS), not the password
ok: refused, no client certificate (mutual TLS): ... within the connect timeout
ok: explicit opt-out works: verify_peer_name=0, another host's certificate
ok: explicit opt-out works: verify_peer=0, an expired certificate
ok: explicit opt-out works: stream[verify_peer]=0, no cafile
ok: class session, rediss://: started, written, no warning
ok: class session, rediss:// as ACL user: started, written, no warning
ok: class session, phpredis's tls:// with auth[] and stream[]: started, written, no warning
ok: class session, mutual TLS: started, written, no warning
ok: class session, wrong CA: session_start() fails
ok: class session, wrong CA: ... with our warning naming the TLS reason, not the password
ok: native session, rediss://: started, written, no warning
ok: native session, rediss:// as ACL user: started, written, no warning
ok: native session, phpredis's tls:// with auth[] and stream[]: started, written, no warning
ok: native session, mutual TLS: started, written, no warning
ok: native session, wrong CA: session_start() fails
ok: native session, wrong CA: ... with our warning naming the TLS reason, not the password
info: class, TLS race: %f s
ok: class, TLS race: 100 sessions started
ok: class, TLS race: 100 of 100 keys kept
ok: class, TLS race: nothing in PHP's error log
info: native, TLS race: %f s
ok: native, TLS race: 100 sessions started
ok: native, TLS race: 100 of 100 keys kept
ok: native, TLS race: nothing in PHP's error log
done
