<?php

namespace RedisLease\Bridge\Tests\Symfony;

use RedisLease\Bridge\Symfony\LeaseStore;
use Symfony\Component\Lock\PersistingStoreInterface;
use Symfony\Component\Lock\Test\AbstractStoreTestCase;
use Symfony\Component\Lock\Tests\Store\BlockingStoreTestTrait;
use Symfony\Component\Lock\Tests\Store\ExpiringStoreTestTrait;
use Symfony\Component\Lock\Tests\Store\SharedLockStoreTestTrait;

/**
 * Symfony Lock's store test case with the traits of what LeaseStore is: expiring, blocking (a fork
 * waits for its parent's lock), shared. Not here: UnserializableTestTrait, for stores whose lock dies
 * with its process (flock, semaphores, ZooKeeper): a LeaseStore Key is serializable on purpose, to be
 * released elsewhere, as RedisStore's; and AbstractRedisStoreTestCase's own tests, of RedisStore's
 * Redis clients and key layout.
 */
final class LeaseStoreTest extends AbstractStoreTestCase
{
    use BlockingStoreTestTrait;
    use ExpiringStoreTestTrait;
    use SharedLockStoreTestTrait;

    /** Microseconds the expiring tests wait on top of a lease: RedisStore's test takes 250 ms. */
    protected function getClockDelay(): int
    {
        return 250000;
    }

    protected function getStore(): PersistingStoreInterface
    {
        return new LeaseStore(getenv('REDIS_LEASE_TEST_DSN'));
    }
}
