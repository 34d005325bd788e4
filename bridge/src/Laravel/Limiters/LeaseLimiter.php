<?php

namespace RedisLease\Bridge\Laravel\Limiters;

use Illuminate\Cache\Limiters\ConcurrencyLimiter;
use Illuminate\Cache\Limiters\LimiterTimeoutException;
use RedisLease\Bridge\Laravel\LeaseStore;
use Throwable;

/**
 * Laravel's ConcurrencyLimiter on the store's DistributedSemaphore: at most `maxLocks` holders of
 * `name`, waiting in the extension's FIFO queue (a release hands the permit to the longest waiter)
 * rather than trying each slot lock every `$sleep` ms. Its permits are not Laravel's slot locks
 * ("<name>1".."<name>N"): a funnel of Laravel's own store and this one never count each other.
 */
class LeaseLimiter extends ConcurrencyLimiter
{
    /** @var LeaseStore */
    protected $store;

    /**
     * @param int|float $timeout Seconds to wait for a permit.
     * @param callable|null $callback Run holding a permit, released after it; without one the permit
     *        is kept until `releaseAfter`, as Laravel's slot lock is.
     * @param int $sleep Laravel's polling interval: unused.
     * @throws LimiterTimeoutException when no permit came within `$timeout`.
     */
    public function block($timeout, $callback = null, $sleep = 250)
    {
        $limit = filter_var($this->maxLocks, FILTER_VALIDATE_INT);
        if ($limit === false || $limit < 1) {
            throw new \InvalidArgumentException('Cache::funnel(): limit() must be an integer >= 1.');
        }
        // releaseAfter is each permit's lease, never renewed; 0 (Laravel's "no expiry") is a lease
        // too: renewed while the callback runs, or the store's unbounded_ttl for a permit kept without one.
        $seconds = (int) $this->releaseAfter;
        if ($seconds <= 0 && !is_callable($callback)) {
            $seconds = (int) ceil($this->store->unboundedTtl());
        }
        $semaphore = $this->store->semaphore($this->name, $limit, $seconds);
        if (!$semaphore->acquire(max(0.0, (float) $timeout))) {
            throw new LimiterTimeoutException();
        }
        if (!is_callable($callback)) {
            $semaphore->detach();
            return true;
        }
        try {
            return $callback();
        } finally {
            $semaphore->release();
        }
    }
}
