<?php

namespace RedisLease\Bridge\Laravel\Limiters;

use Illuminate\Cache\Limiters\ConcurrencyLimiterBuilder;

/**
 * Cache::funnel($name)->limit()->releaseAfter()->block()->then() on the `redis_lease` store: Laravel's
 * builder, making a LeaseLimiter. sleep() is accepted and has nothing to tune (no polling).
 */
class LeaseLimiterBuilder extends ConcurrencyLimiterBuilder
{
    protected function createLimiter()
    {
        return new LeaseLimiter($this->connection->getStore(), $this->name, $this->maxLocks, $this->releaseAfter);
    }
}
