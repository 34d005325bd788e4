<?php

namespace RedisLease\Bridge\Laravel;

use Illuminate\Cache\CacheManager;
use Illuminate\Cache\RedisStore;
use Illuminate\Session\SessionManager;
use Illuminate\Support\ServiceProvider;
use InvalidArgumentException;
use RedisLockingSessionHandler;

/**
 * Registers the `redis_lease` cache store driver and the `redis_lease` session driver.
 * Auto-discovered through composer.json's extra.laravel.providers.
 *
 * config/cache.php:
 *     'leases' => ['driver' => 'redis_lease', 'dsn' => env('REDIS_LEASE_DSN'), 'values' => 'redis'],
 *     optional: 'prefix' (default: cache.prefix), 'unbounded_ttl' (86400), 'renew_ttl' (10).
 * config/session.php:
 *     'driver' => 'redis_lease', 'dsn' => env('REDIS_LEASE_DSN'),
 *     optional: 'redis_lease' => [handler options: lock_wait, on_lock_timeout, max_waiters, prefix, ...];
 *     'lease_compat' => 'redis': sessions kept where and as Laravel's `redis` driver keeps them (its
 *     keys, its format), so both drivers share them during a rolling deploy (CacheFormatSessionHandler).
 * A null DSN means the ini setting redis_lease.dsn.
 */
class RedisLeaseServiceProvider extends ServiceProvider
{
    /**
     * The key prefix of Laravel's `redis` session driver, as it makes it: its cache store's
     * (session.store, else `redis`) prefix, or session.prefix where the driver takes it (Laravel 13),
     * after its connection's (session.connection) client prefix. Public for the driver's closure,
     * which Laravel 13 binds to the SessionManager.
     *
     * @internal
     */
    public static function redisDriverPrefix($app): string
    {
        $config = $app['config'];
        $name = $config->get('session.store') ?: 'redis';
        $store = clone $app['cache']->store($name)->getStore();
        if (!$store instanceof RedisStore) {
            throw new InvalidArgumentException("session.lease_compat 'redis': the cache store '$name' is not a Redis store");
        }
        if (self::driverTakesSessionPrefix() && ($prefix = $config->get('session.prefix'))) {
            $store->setPrefix($prefix);
        }
        $store->setConnection($config->get('session.connection'));
        $client = $store->connection()->client();
        if (!$client instanceof \Redis) {
            throw new InvalidArgumentException("session.lease_compat 'redis' reads the key prefix from a phpredis "
                . "connection; with another client, set session.redis_lease.prefix to the driver's key prefix");
        }
        // phpredis packs what Laravel serialize()d once more (its serializer, its compression): the
        // sessions would be read as bytes no side could decode, and written back unreadable to the other.
        $packed = array_filter([
            'serializer' => $client->getOption(\Redis::OPT_SERIALIZER) !== \Redis::SERIALIZER_NONE,
            'compression' => defined('Redis::OPT_COMPRESSION') && $client->getOption(\Redis::OPT_COMPRESSION) !== \Redis::COMPRESSION_NONE,
        ]);
        if ($packed) {
            throw new InvalidArgumentException("session.lease_compat 'redis': the session connection packs values with "
                . "phpredis's " . implode(' and ', array_keys($packed)) . ", which Laravel's driver stores its sessions "
                . 'through and this driver cannot read; share sessions over a connection without them');
        }
        $prefix = (string) $client->getOption(\Redis::OPT_PREFIX) . $store->getPrefix();
        if ($prefix === '') {
            // The handler refuses it too: under no prefix any key of the application's is a session to a
            // cookie that names it.
            throw new InvalidArgumentException("session.lease_compat 'redis': Laravel's redis driver keeps these "
                . 'sessions under their bare ids (no database.redis.options.prefix, cache.prefix or session.prefix); '
                . 'give it a prefix (its sessions then start anew), or set session.redis_lease.prefix');
        }
        return $prefix;
    }

    /**
     * Whether Laravel's own `redis` session driver applies session.prefix (Laravel 13's, since its
     * pull request #60700): where it does not, its sessions are not under it either.
     */
    private static function driverTakesSessionPrefix(): bool
    {
        static $takes = null;
        if ($takes === null) {
            $driver = new \ReflectionMethod(SessionManager::class, 'createRedisDriver');
            $lines = @file((string) $driver->getFileName());
            // Sources not shipped (an opcache-only deploy): by version, 13 and later.
            $takes = $lines === false
                ? version_compare(\Illuminate\Foundation\Application::VERSION, '13.0', '>=')
                : str_contains(implode('', array_slice($lines, $driver->getStartLine() - 1,
                    $driver->getEndLine() - $driver->getStartLine() + 1)), "'session.prefix'");
        }
        return $takes;
    }

    public function register()
    {
        // On whichever comes first, this provider or the managers: both may be made early.
        $this->callAfterResolving('cache', function (CacheManager $cache): void {
            $cache->extend('redis_lease', function ($app, array $config) {
                // Bound to the CacheManager (its setEventDispatcher() gives the store Laravel's events).
                $values = $config['values'] ?? null;
                $prefix = $config['prefix'] ?? $app['config']->get('cache.prefix');
                $store = new LeaseStore(
                    $config['dsn'] ?? null,
                    // As Laravel's redis store puts it: "<prefix>:<name>".
                    $prefix !== null && $prefix !== '' ? $prefix . ':' : '',
                    (float) ($config['unbounded_ttl'] ?? 86400),
                    (float) ($config['renew_ttl'] ?? 10),
                    $values === null ? null : fn () => $this->store($values)->getStore(),
                );
                // As $this->repository() makes it, with Cache::funnel() on the store's semaphore.
                $repository = new LeaseRepository($store, array_intersect_key($config, ['store' => true]));
                if ($config['events'] ?? true) {
                    $this->setEventDispatcher($repository);
                }
                return $repository;
            });
        });

        $this->callAfterResolving('session', static function (SessionManager $sessions): void {
            $sessions->extend('redis_lease', static function ($app) {
                $config = $app['config'];
                // Laravel's session lifetime is in minutes; the handler's ttl option in seconds.
                $options = ['ttl' => (int) $config->get('session.lifetime', 120) * 60] + (array) $config->get('session.redis_lease', []);
                $compat = $config->get('session.lease_compat');
                if ($compat === null) {
                    return new RedisLockingSessionHandler($config->get('session.dsn'), $options);
                }
                if ($compat !== 'redis') {
                    throw new InvalidArgumentException("session.lease_compat: 'redis' or null, got " . var_export($compat, true));
                }
                $options['prefix'] ??= RedisLeaseServiceProvider::redisDriverPrefix($app);
                return new CacheFormatSessionHandler(new RedisLockingSessionHandler($config->get('session.dsn'), $options));
            });
        });
    }
}
