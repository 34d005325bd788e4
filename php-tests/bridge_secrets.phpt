--TEST--
Bridge, secrets: the DSN a bridge store or lock was given (it may carry the Redis password) shows in none of print_r(), var_dump(), var_export(), debug_zval_dump() or serialize() of the object (Flare and Horizon keep dumps and queued payloads); the stores and locks still use it; every bridge method's DSN, session id or data parameter is #[\SensitiveParameter] (traces)
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Illuminate/autoload.php';
require 'Symfony/Component/Lock/autoload.php';
require 'Symfony/Component/Semaphore/autoload.php';
require BR_BRIDGE . '/autoload.php';

use RedisLease\Bridge\Laravel\LeaseStore as LaravelStore;
use RedisLease\Bridge\Symfony\LeaseSemaphoreStore;
use RedisLease\Bridge\Symfony\LeaseStore as SymfonyStore;

const SECRET = 'Br1dgeS3cretPw';

$srv = rl_start_redis(['--requirepass', SECRET], SECRET);
$dsn = 'redis://:' . SECRET . '@127.0.0.1:' . $srv['port'];

$laravel = new LaravelStore($dsn, 'app:');
$objects = [
    'Laravel LeaseStore' => $laravel,
    'Laravel LeaseLock' => $laravel->lock('secrets', 10),
    'Symfony LeaseStore' => new SymfonyStore($dsn),
    'Symfony LeaseSemaphoreStore' => new LeaseSemaphoreStore($dsn),
];
foreach ($objects as $what => $o) {
    $shown = [
        'print_r' => print_r($o, true),
        'var_export' => var_export($o, true),
        'var_dump' => (function () use ($o) { ob_start(); var_dump($o); return ob_get_clean(); })(),
        'debug_zval_dump' => (function () use ($o) { ob_start(); debug_zval_dump($o); return ob_get_clean(); })(),
    ];
    try {
        $shown['serialize'] = serialize($o);
    } catch (Throwable $e) {
        // Refusing is fine (Laravel's own RedisLock cannot be serialized either).
        $shown['serialize'] = get_class($e) . ': ' . $e->getMessage();
    }
    foreach ($shown as $how => $text) {
        rl_ok("$what: $how shows no password", $text !== '' && !str_contains($text, SECRET), $text);
    }
}

// They still reach Redis with it (a wrong or missing password would be refused).
$lock = $laravel->lock('secrets', 10);
rl_ok('Laravel: a lock taken through the store', $lock->get() === true);
rl_ok('Laravel: and released', $lock->release() === true);
$factory = new Symfony\Component\Lock\LockFactory($objects['Symfony LeaseStore']);
$l = $factory->createLock('secrets');
rl_ok('Symfony: a lock taken through the store', $l->acquire() === true);
$l->release();
rl_ok('Symfony: and released', $l->isAcquired() === false);
$sem = (new Symfony\Component\Semaphore\SemaphoreFactory($objects['Symfony LeaseSemaphoreStore']))->createSemaphore('secrets', 2);
rl_ok('Symfony: a permit taken through the semaphore store', $sem->acquire() === true);
$sem->release();

// Every bridge method's DSN, session id, session data, password or token is
// #[\SensitiveParameter]: a trace (Laravel turns a handler's warning into an
// ErrorException) shows its frames' arguments.
$unmarked = [];
$checked = 0;
// Read from the source: some classes extend a newer Laravel's than Debian 12's.
$files = new RecursiveIteratorIterator(new RecursiveDirectoryIterator(BR_BRIDGE . '/src', FilesystemIterator::SKIP_DOTS));
foreach ($files as $file) {
    preg_match_all('/function\s+(\w+)\s*\((.*?)\)\s*[:{;]/s', file_get_contents($file->getPathname()), $fns, PREG_SET_ORDER);
    foreach ($fns as [, $fn, $params]) {
        foreach (explode(',', $params) as $param) {
            if (preg_match('/\$(dsn|id|sessionId|data|password|auth|token)\b/i', $param, $m)) {
                $checked++;
                if (!str_contains($param, 'SensitiveParameter')) {
                    $unmarked[] = $file->getFilename() . ": $fn(\${$m[1]})";
                }
            }
        }
    }
}
rl_ok('the bridge\'s secret-bearing parameters were found', $checked >= 6, (string) $checked);
rl_same('... and every one is #[\SensitiveParameter]', [], $unmarked);
echo "done\n";
?>
--EXPECT--
ok: Laravel LeaseStore: print_r shows no password
ok: Laravel LeaseStore: var_export shows no password
ok: Laravel LeaseStore: var_dump shows no password
ok: Laravel LeaseStore: debug_zval_dump shows no password
ok: Laravel LeaseStore: serialize shows no password
ok: Laravel LeaseLock: print_r shows no password
ok: Laravel LeaseLock: var_export shows no password
ok: Laravel LeaseLock: var_dump shows no password
ok: Laravel LeaseLock: debug_zval_dump shows no password
ok: Laravel LeaseLock: serialize shows no password
ok: Symfony LeaseStore: print_r shows no password
ok: Symfony LeaseStore: var_export shows no password
ok: Symfony LeaseStore: var_dump shows no password
ok: Symfony LeaseStore: debug_zval_dump shows no password
ok: Symfony LeaseStore: serialize shows no password
ok: Symfony LeaseSemaphoreStore: print_r shows no password
ok: Symfony LeaseSemaphoreStore: var_export shows no password
ok: Symfony LeaseSemaphoreStore: var_dump shows no password
ok: Symfony LeaseSemaphoreStore: debug_zval_dump shows no password
ok: Symfony LeaseSemaphoreStore: serialize shows no password
ok: Laravel: a lock taken through the store
ok: Laravel: and released
ok: Symfony: a lock taken through the store
ok: Symfony: and released
ok: Symfony: a permit taken through the semaphore store
ok: the bridge's secret-bearing parameters were found
ok: ... and every one is #[\SensitiveParameter]
done
