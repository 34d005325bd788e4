<?php

namespace RedisLease\Bridge\Tests\Symfony;

use RedisLease\Bridge\Symfony\LeaseSemaphoreStore;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;
use Symfony\Component\Semaphore\Tests\Store\AbstractStoreTestCase;

/**
 * Symfony Semaphore's store test case (limits, weights, expiry), against LeaseSemaphoreStore.
 */
final class LeaseSemaphoreStoreTest extends AbstractStoreTestCase
{
    protected function getStore(): PersistingStoreInterface
    {
        return new LeaseSemaphoreStore(getenv('REDIS_LEASE_TEST_DSN'));
    }

    /**
     * Symfony 5.4's version of this test also matches RedisStore's message ("the script returns a
     * positive number"); Symfony's current one asks for the exception only, as here.
     */
    public function testPutOffExpirationWhenSaveHasNotBeenCalled()
    {
        $this->expectException(SemaphoreExpiredException::class);
        $this->getStore()->putOffExpiration(new Key(__METHOD__, 4, 2), 20);
    }
}
