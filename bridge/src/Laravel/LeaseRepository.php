<?php

namespace RedisLease\Bridge\Laravel;

use BadMethodCallException;
use Illuminate\Cache\Limiters\ConcurrencyLimiterBuilder;
use Illuminate\Cache\Repository;

/**
 * The cache repository of the `redis_lease` store: Laravel's own, except that Cache::funnel() (Laravel
 * 12.53+) limits with a DistributedSemaphore instead of polling `limit` slot locks every 250 ms.
 */
class LeaseRepository extends Repository
{
    /**
     * @param \UnitEnum|string $name
     * @return ConcurrencyLimiterBuilder as Laravel's, whose limiter is the store's semaphore.
     */
    public function funnel($name)
    {
        if (!class_exists(ConcurrencyLimiterBuilder::class)) {
            throw new BadMethodCallException('Cache::funnel() needs Laravel 12.53 or newer.');
        }
        $store = $this->getStore();
        if (!$store instanceof LeaseStore) {
            return parent::funnel($name);
        }
        return new Limiters\LeaseLimiterBuilder($this, $name instanceof \UnitEnum ? self::enumValue($name) : $name);
    }

    private static function enumValue(\UnitEnum $name): string
    {
        return (string) ($name instanceof \BackedEnum ? $name->value : $name->name);
    }
}
