<?php

namespace RedisLease\Bridge\Laravel;

use BadMethodCallException;
use Closure;
use DistributedSemaphore;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Contracts\Cache\Store;
use InvalidArgumentException;

/**
 * The `redis_lease` cache store: its locks are redis_lease leases (LeaseLock), and semaphore() gives
 * an at-most-N limiter (DistributedSemaphore) on the same Redis and prefix.
 *
 * It keeps no cache values itself. Laravel features that need a store's values as well as its locks
 * (the scheduler's mutexes before Laravel 11 call add()/has(); an application whose default store is
 * this one calls get()/put()) get them from another store named by the `values` option; without it,
 * every value method throws BadMethodCallException naming the option.
 */
class LeaseStore implements Store, LockProvider
{
    /** Wrapped: dumps, traces and serialize() never show the password it may carry. */
    private ?\SensitiveParameterValue $dsn;

    /** @var Closure(): Store|null */
    private ?Closure $values;

    /**
     * @param string|null $dsn Redis, as for DistributedLock; null: the ini setting redis_lease.dsn.
     * @param string $prefix Put before every lock name (Laravel's cache prefix), so apps sharing a
     *        Redis keep their locks apart.
     * @param float $unboundedTtl Seconds a lock asked for with `$seconds = 0` lives when it outlives its
     *        object (no callback).
     * @param float $renewTtl Lease of a `$seconds = 0` lock held while a callback runs, renewed by the
     *        extension's watchdog: a killed worker frees it within this.
     * @param (Closure(): Store)|null $values The store that keeps this store's values, made on first use.
     */
    public function __construct(
        #[\SensitiveParameter] ?string $dsn = null,
        private string $prefix = '',
        private float $unboundedTtl = 86400.0,
        private float $renewTtl = 10.0,
        ?Closure $values = null,
    ) {
        $this->dsn = $dsn === null ? null : new \SensitiveParameterValue($dsn);
        foreach (['unbounded_ttl' => $unboundedTtl, 'renew_ttl' => $renewTtl] as $name => $seconds) {
            if (!($seconds > 0)) {
                throw new InvalidArgumentException("redis_lease cache store: '$name' must be a number of seconds > 0");
            }
        }
        $this->values = $values;
    }

    /**
     * @param string $name
     * @param int $seconds 0: see LeaseLock (never "forever").
     * @param string|null $owner A token from owner() to act on an existing hold; null for a new lock.
     */
    public function lock($name, $seconds = 0, #[\SensitiveParameter] $owner = null)
    {
        return new LeaseLock($this->prefix . $name, $seconds, $owner, $this->dsn?->getValue(), $this->unboundedTtl, $this->renewTtl);
    }

    /**
     * The lock held by `$owner` (a token from owner(), taken by any process): release() or refresh() it.
     */
    public function restoreLock($name, #[\SensitiveParameter] $owner)
    {
        return $this->lock($name, 0, $owner);
    }

    /**
     * An at-most-`$limit` semaphore on this store's Redis and prefix, for what Laravel's
     * `Cache::funnel()` does with `$limit` slot locks and polling: `Cache::store('leases')
     * ->semaphore('exports', 3, 60)->synchronized($callback, wait: 10)` waits in the extension's FIFO
     * queue and is handed a permit by a release (RedisLease\LockTimeoutException after `wait`).
     * Its permits are not funnel()'s slot locks: the two never count each other's holders.
     *
     * @param int $seconds Each permit's lease, never renewed (funnel()'s releaseAfter); 0 (Laravel's
     *        "no expiry"): a `renew_ttl` lease the extension's watchdog renews while the object holds
     *        it, as LeaseLock does for a callback.
     */
    public function semaphore(string $name, int $limit, $seconds = 60): DistributedSemaphore
    {
        return $seconds > 0
            ? new DistributedSemaphore($this->prefix . $name, $limit, (float) $seconds, $this->dsn?->getValue())
            : new DistributedSemaphore($this->prefix . $name, $limit, $this->renewTtl, $this->dsn?->getValue(), true);
    }

    /** Seconds a lock (or permit) asked for with no expiry lives when nothing renews it. */
    public function unboundedTtl(): float
    {
        return $this->unboundedTtl;
    }

    public function getPrefix()
    {
        return $this->prefix;
    }

    // Cache values: delegated to the `values` store, if one is configured.

    public function get($key)
    {
        return $this->values(__FUNCTION__)->get($key);
    }

    public function many(array $keys)
    {
        return $this->values(__FUNCTION__)->many($keys);
    }

    public function put($key, $value, $seconds)
    {
        return $this->values(__FUNCTION__)->put($key, $value, $seconds);
    }

    public function putMany(array $values, $seconds)
    {
        return $this->values(__FUNCTION__)->putMany($values, $seconds);
    }

    /**
     * Laravel's Repository::add() uses a store's own add() when it has one, which is atomic in
     * Laravel's stores: the scheduler's mutexes rely on that. Without one, the Repository's fallback.
     */
    public function add($key, $value, $seconds)
    {
        $store = $this->values(__FUNCTION__);
        if (method_exists($store, 'add')) {
            return $store->add($key, $value, $seconds);
        }
        return $store->get($key) === null ? $store->put($key, $value, $seconds) : false;
    }

    public function increment($key, $value = 1)
    {
        return $this->values(__FUNCTION__)->increment($key, $value);
    }

    public function decrement($key, $value = 1)
    {
        return $this->values(__FUNCTION__)->decrement($key, $value);
    }

    public function forever($key, $value)
    {
        return $this->values(__FUNCTION__)->forever($key, $value);
    }

    /** Laravel 13's Store::touch(). */
    public function touch($key, $seconds)
    {
        return $this->values(__FUNCTION__)->touch($key, $seconds);
    }

    public function forget($key)
    {
        return $this->values(__FUNCTION__)->forget($key);
    }

    /** Flushes the values store; locks are leases and are never flushed. */
    public function flush()
    {
        return $this->values(__FUNCTION__)->flush();
    }

    private function values(string $method): Store
    {
        if ($this->values === null) {
            throw new BadMethodCallException("The redis_lease cache store keeps locks only: $method() needs "
                . "the store's 'values' option, naming the cache store that keeps its values (e.g. 'redis').");
        }
        $store = ($this->values)();
        if ($store === $this) {
            throw new InvalidArgumentException("The redis_lease cache store's 'values' option names the store itself.");
        }
        return $store;
    }
}
