--TEST--
Bridge, the package: bridge/composer.json names the package, requires ext-redis_lease, declares the Laravel and Symfony versions run here (Laravel 8.83, 10.48, 13.31; Symfony 5.4, 6.4, 7.4, 8.1, each with the later minors of its major) and Laravel 11-12, checked by signatures, maps RedisLease\Bridge\ to src/ (every file there is the class its path names) and lists the Laravel provider; the classes implement the frameworks' interfaces with the signatures of both the tested (Laravel 8.83, Symfony 5.4) and the declared versions
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Illuminate/autoload.php';
require 'Symfony/Component/Lock/autoload.php';
require 'Symfony/Component/Semaphore/autoload.php';

$composer = json_decode(file_get_contents(BR_BRIDGE . '/composer.json'), true, 512, JSON_THROW_ON_ERROR);
rl_same('name', 'redis-lease/bridge', $composer['name'] ?? null);
rl_same('requires the extension', '*', $composer['require']['ext-redis_lease'] ?? null);
rl_same('PSR-4: RedisLease\\Bridge\\ -> src/', ['RedisLease\\Bridge\\' => 'src/'], $composer['autoload']['psr-4'] ?? null);
rl_same('Laravel: 8.83+, 10.48+, 11, 12, 13.31+ declared (9, older minors and 14 refused)', '<8.83 || >=9.0 <10.48 || >=13.0 <13.31 || >=14.0',
    $composer['conflict']['laravel/framework'] ?? null);
rl_same('... for illuminate/cache and illuminate/session as for laravel/framework', [$composer['conflict']['laravel/framework'] ?? null, $composer['conflict']['laravel/framework'] ?? null],
    [$composer['conflict']['illuminate/cache'] ?? null, $composer['conflict']['illuminate/session'] ?? null]);
rl_same('Symfony: 5.4, 6.4, 7.4, 8.1+ declared (7.0-7.3, 8.0 and 9 refused)', '<5.4 || >=6.0 <6.4 || >=7.0 <7.4 || >=8.0 <8.1 || >=9.0',
    $composer['conflict']['symfony/lock'] ?? null);
rl_same('... for Symfony Semaphore as for Lock', [$composer['conflict']['symfony/lock'] ?? null, substr($composer['suggest']['symfony/lock'] ?? '', 0, 15)],
    [$composer['conflict']['symfony/semaphore'] ?? null, substr($composer['suggest']['symfony/semaphore'] ?? '', 0, 15)]);

// Composer's PSR-4 rule, from composer.json itself (not bridge/autoload.php).
foreach ($composer['autoload']['psr-4'] as $prefix => $dir) {
    spl_autoload_register(static function (string $class) use ($prefix, $dir): void {
        if (str_starts_with($class, $prefix)) {
            $file = BR_BRIDGE . '/' . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
        }
    });
}
$files = new RecursiveIteratorIterator(new RecursiveDirectoryIterator(BR_BRIDGE . '/src', FilesystemIterator::SKIP_DOTS));
$classes = [];
foreach ($files as $file) {
    $classes[$file->getRealPath()] = 'RedisLease\\Bridge\\' . str_replace('/', '\\', substr($file->getPathname(), strlen(BR_BRIDGE . '/src/'), -4));
}
asort($classes);
// Cache::funnel()'s classes extend Laravel 12.53's: with an older Laravel they cannot load, and their
// file is read instead.
$funnel = class_exists(Illuminate\Cache\Limiters\ConcurrencyLimiter::class);
foreach ($classes as $path => $class) {
    if (!$funnel && str_contains($class, '\\Limiters\\')) {
        $src = file_get_contents($path);
        $declared = preg_match('/^namespace ([^;]+);/m', $src, $ns) && preg_match('/^class (\w+)/m', $src, $cl) ? "$ns[1]\\$cl[1]" : null;
        rl_same("src/ file declares $class", $class, $declared);
        continue;
    }
    rl_ok("src/ file declares $class", class_exists($class) && (new ReflectionClass($class))->getFileName() === $path);
}
$classes = array_values($classes);
rl_same('the classes', ['RedisLease\\Bridge\\Laravel\\CacheFormatSessionHandler', 'RedisLease\\Bridge\\Laravel\\LeaseLock',
    'RedisLease\\Bridge\\Laravel\\LeaseRepository',
    'RedisLease\\Bridge\\Laravel\\LeaseStore', 'RedisLease\\Bridge\\Laravel\\Limiters\\LeaseLimiter',
    'RedisLease\\Bridge\\Laravel\\Limiters\\LeaseLimiterBuilder', 'RedisLease\\Bridge\\Laravel\\RedisLeaseServiceProvider', 'RedisLease\\Bridge\\Symfony\\LeaseSemaphoreStore',
    'RedisLease\\Bridge\\Symfony\\LeaseStore'], $classes);
rl_same('extra.laravel.providers: the provider', ['RedisLease\\Bridge\\Laravel\\RedisLeaseServiceProvider'], $composer['extra']['laravel']['providers'] ?? null);
rl_ok('... a ServiceProvider', is_subclass_of('RedisLease\\Bridge\\Laravel\\RedisLeaseServiceProvider', Illuminate\Support\ServiceProvider::class));

rl_ok('Laravel: LeaseStore is a cache Store and a LockProvider',
    is_subclass_of(RedisLease\Bridge\Laravel\LeaseStore::class, Illuminate\Contracts\Cache\Store::class)
    && is_subclass_of(RedisLease\Bridge\Laravel\LeaseStore::class, Illuminate\Contracts\Cache\LockProvider::class));
rl_ok('Laravel: LeaseLock extends Illuminate\\Cache\\Lock', is_subclass_of(RedisLease\Bridge\Laravel\LeaseLock::class, Illuminate\Cache\Lock::class));
// Laravel 10-12 declare these methods without types, as 8.83: untyped overrides fit all of them.
$typed = [];
foreach (['get', 'block', 'release', 'forceRelease', 'owner', 'refresh', 'isOwnedBy', 'acquire'] as $m) {
    $rm = new ReflectionMethod(RedisLease\Bridge\Laravel\LeaseLock::class, $m);
    foreach ($rm->getParameters() as $p) {
        if ($p->hasType()) {
            $typed[] = "$m(\${$p->getName()})";
        }
    }
}
rl_same('Laravel: LeaseLock\'s overrides take untyped parameters, as Laravel 8-12 declare them', [], $typed);

$sf = RedisLease\Bridge\Symfony\LeaseStore::class;
rl_ok('Symfony: LeaseStore is a PersistingStoreInterface, a BlockingStoreInterface and a BlockingSharedLockStoreInterface',
    is_subclass_of($sf, Symfony\Component\Lock\PersistingStoreInterface::class) && is_subclass_of($sf, Symfony\Component\Lock\BlockingStoreInterface::class)
    && is_subclass_of($sf, Symfony\Component\Lock\BlockingSharedLockStoreInterface::class));
$sem = RedisLease\Bridge\Symfony\LeaseSemaphoreStore::class;
rl_ok('Symfony: LeaseSemaphoreStore is a Semaphore PersistingStoreInterface', is_subclass_of($sem, Symfony\Component\Semaphore\PersistingStoreInterface::class));
// Symfony 7 declares these return types on the interfaces (5.4 none, 6.4 only exists(): bool).
$returns = [];
foreach (['save', 'delete', 'exists', 'putOffExpiration', 'waitAndSave', 'saveRead', 'waitAndSaveRead'] as $m) {
    $returns["LeaseStore::$m"] = (string) (new ReflectionMethod($sf, $m))->getReturnType();
}
foreach (['save', 'delete', 'exists', 'putOffExpiration'] as $m) {
    $returns["LeaseSemaphoreStore::$m"] = (string) (new ReflectionMethod($sem, $m))->getReturnType();
}
rl_same('Symfony: return types as 7.x declares them', ['LeaseStore::save' => 'void', 'LeaseStore::delete' => 'void',
    'LeaseStore::exists' => 'bool', 'LeaseStore::putOffExpiration' => 'void', 'LeaseStore::waitAndSave' => 'void',
    'LeaseStore::saveRead' => 'void', 'LeaseStore::waitAndSaveRead' => 'void', 'LeaseSemaphoreStore::save' => 'void',
    'LeaseSemaphoreStore::delete' => 'void', 'LeaseSemaphoreStore::exists' => 'bool', 'LeaseSemaphoreStore::putOffExpiration' => 'void'], $returns);
rl_same('Laravel: LeaseStore::semaphore() returns a DistributedSemaphore', 'DistributedSemaphore',
    (string) (new ReflectionMethod(RedisLease\Bridge\Laravel\LeaseStore::class, 'semaphore'))->getReturnType());

// A DSN may carry a password: it never shows in the arguments of a trace.
$traces = '';
foreach ([fn () => new RedisLease\Bridge\Laravel\LeaseStore('redis://:s3cret@127.0.0.1:1', '', 0.0),
             fn () => new RedisLease\Bridge\Symfony\LeaseStore('redis://:s3cret@127.0.0.1:1', 0.0)] as $make) {
    try {
        $make();
    } catch (Exception $e) {
        $traces .= print_r($e->getTrace(), true) . $e->getTraceAsString() . $e->getMessage();
    }
}
rl_ok('bad configuration is refused without the DSN\'s password in the exception or its trace',
    $traces !== '' && !str_contains($traces, 's3cret') && str_contains($traces, 'SensitiveParameterValue'), $traces);
// Every DSN parameter of the bridge's classes is #[SensitiveParameter], including those with nothing to refuse.
$plain = [];
foreach ([RedisLease\Bridge\Laravel\LeaseStore::class, RedisLease\Bridge\Symfony\LeaseStore::class, $sem] as $class) {
    $p = new ReflectionParameter([$class, '__construct'], 'dsn');
    if ($p->getAttributes(SensitiveParameter::class) === []) {
        $plain[] = $class;
    }
}
rl_same('... every constructor\'s $dsn is a SensitiveParameter', [], $plain);
echo "done\n";
?>
--EXPECT--
ok: name
ok: requires the extension
ok: PSR-4: RedisLease\Bridge\ -> src/
ok: Laravel: 8.83+, 10.48+, 11, 12, 13.31+ declared (9, older minors and 14 refused)
ok: ... for illuminate/cache and illuminate/session as for laravel/framework
ok: Symfony: 5.4, 6.4, 7.4, 8.1+ declared (7.0-7.3, 8.0 and 9 refused)
ok: ... for Symfony Semaphore as for Lock
ok: src/ file declares RedisLease\Bridge\Laravel\CacheFormatSessionHandler
ok: src/ file declares RedisLease\Bridge\Laravel\LeaseLock
ok: src/ file declares RedisLease\Bridge\Laravel\LeaseRepository
ok: src/ file declares RedisLease\Bridge\Laravel\LeaseStore
ok: src/ file declares RedisLease\Bridge\Laravel\Limiters\LeaseLimiter
ok: src/ file declares RedisLease\Bridge\Laravel\Limiters\LeaseLimiterBuilder
ok: src/ file declares RedisLease\Bridge\Laravel\RedisLeaseServiceProvider
ok: src/ file declares RedisLease\Bridge\Symfony\LeaseSemaphoreStore
ok: src/ file declares RedisLease\Bridge\Symfony\LeaseStore
ok: the classes
ok: extra.laravel.providers: the provider
ok: ... a ServiceProvider
ok: Laravel: LeaseStore is a cache Store and a LockProvider
ok: Laravel: LeaseLock extends Illuminate\Cache\Lock
ok: Laravel: LeaseLock's overrides take untyped parameters, as Laravel 8-12 declare them
ok: Symfony: LeaseStore is a PersistingStoreInterface, a BlockingStoreInterface and a BlockingSharedLockStoreInterface
ok: Symfony: LeaseSemaphoreStore is a Semaphore PersistingStoreInterface
ok: Symfony: return types as 7.x declares them
ok: Laravel: LeaseStore::semaphore() returns a DistributedSemaphore
ok: bad configuration is refused without the DSN's password in the exception or its trace
ok: ... every constructor's $dsn is a SensitiveParameter
done
