<?php

namespace RedisLease\Bridge\Laravel;

use Illuminate\Cache\CacheManager;
use Illuminate\Session\SessionManager;
use Illuminate\Support\ServiceProvider;
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
 *     optional: 'redis_lease' => [handler options: lock_wait, on_lock_timeout, max_waiters, prefix, ...].
 * A null DSN means the ini setting redis_lease.dsn.
 */
class RedisLeaseServiceProvider extends ServiceProvider
{
    public function register()
    {
        // On whichever comes first, this provider or the managers: both may be made early.
        $this->callAfterResolving('cache', function (CacheManager $cache): void {
            $cache->extend('redis_lease', function ($app, array $config) {
                // Bound to the CacheManager: $this->repository() gives the store Laravel's events.
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
                return $this->repository($store, $config);
            });
        });

        $this->callAfterResolving('session', static function (SessionManager $sessions): void {
            $sessions->extend('redis_lease', static function ($app) {
                $config = $app['config'];
                // Laravel's session lifetime is in minutes; the handler's ttl option in seconds.
                return new RedisLockingSessionHandler(
                    $config->get('session.dsn'),
                    ['ttl' => (int) $config->get('session.lifetime', 120) * 60] + (array) $config->get('session.redis_lease', []),
                );
            });
        });
    }
}
