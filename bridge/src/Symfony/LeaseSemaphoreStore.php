<?php

namespace RedisLease\Bridge\Symfony;

use DistributedSemaphore;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\PersistingStoreInterface;

/**
 * A Symfony Semaphore store whose permits are redis_lease DistributedSemaphore permits:
 * `new SemaphoreFactory(new LeaseSemaphoreStore($dsn))`.
 *
 * Each permit is a lease of its own (a crashed holder's permit frees at its ttl), and the limit is the
 * Key's, as with Symfony's RedisStore. Symfony's Semaphore never waits (acquire() tries once), so the
 * extension's FIFO queue is not used here; DistributedSemaphore::acquire($wait) waits in it.
 *
 * One permit per Key: a Key with a weight above 1 is refused (InvalidArgumentException). The extension
 * takes one permit per hold; taking several with several holds would not be one step (two callers
 * could each get part of what they need and wait for each other), so it is left to the extension.
 *
 * The Key keeps only the permit's token, as Symfony's RedisStore does: the permit outlives the Semaphore
 * and the Key objects (with `autoRelease: false`) until its ttl, and a serialized Key carries it to another
 * process, where delete(), putOffExpiration() and exists() act on it by its token.
 */
final class LeaseSemaphoreStore implements PersistingStoreInterface
{
    /**
     * @param string|null $dsn Redis, as for DistributedSemaphore; null: the ini setting redis_lease.dsn.
     */
    public function __construct(#[\SensitiveParameter] private ?string $dsn = null)
    {
    }

    /**
     * Takes a permit for `$ttlInSecond` seconds if fewer than the Key's limit are held, or extends the
     * Key's own permit to that.
     *
     * @throws SemaphoreAcquiringException when all the permits are held.
     * @throws InvalidArgumentException for a weight above 1, or a ttl that is not > 0.
     */
    public function save(Key $key, float $ttlInSecond): void
    {
        self::checkTtl($ttlInSecond);
        if ($key->getWeight() !== 1) {
            throw new InvalidArgumentException(sprintf('LeaseSemaphoreStore takes one permit per Key: the weight of the "%s" semaphore must be 1, got %d.', $key, $key->getWeight()));
        }
        if ($this->extendOwn($key, $ttlInSecond)) {
            return;
        }
        $permit = new DistributedSemaphore((string) $key, $key->getLimit(), $ttlInSecond, $this->dsn);
        if (!$permit->acquire()) {
            throw new SemaphoreAcquiringException($key, sprintf('all %d permits are held', $key->getLimit()));
        }
        // The permit outlives this object: released by its token (delete()) or at its ttl.
        $key->setState(__CLASS__, $permit->detach());
    }

    /**
     * Extends the Key's permit to `$ttlInSecond` seconds from now.
     *
     * @throws SemaphoreExpiredException when the Key holds no permit (never taken, released, or expired).
     */
    public function putOffExpiration(Key $key, float $ttlInSecond): void
    {
        self::checkTtl($ttlInSecond);
        if (!$this->extendOwn($key, $ttlInSecond)) {
            throw new SemaphoreExpiredException($key, 'it holds no permit');
        }
    }

    /** Gives the Key's permit back, if it still holds one; nothing if it does not. */
    public function delete(Key $key): void
    {
        $permit = $this->permit($key, 1.0);
        if ($permit === null) {
            return;
        }
        $permit->release();
        $key->removeState(__CLASS__);
    }

    /** Whether the Key holds a permit now (one question to Redis). */
    public function exists(Key $key): bool
    {
        $permit = $this->permit($key, 1.0);
        if ($permit === null) {
            return false;
        }
        try {
            return $permit->isAcquired();
        } finally {
            // A check never releases the permit when the object goes.
            $permit->detach();
        }
    }

    private function extendOwn(Key $key, float $ttl): bool
    {
        $permit = $this->permit($key, $ttl);
        if ($permit === null) {
            return false;
        }
        try {
            return $permit->refresh($ttl);
        } finally {
            $permit->detach();
        }
    }

    /** The Key's permit, by its token (nothing asked of Redis yet); null when it took none. */
    private function permit(Key $key, float $ttl): ?DistributedSemaphore
    {
        if (!$key->hasState(__CLASS__)) {
            return null;
        }
        return DistributedSemaphore::restore((string) $key, $key->getLimit(), $key->getState(__CLASS__), $ttl, $this->dsn);
    }

    private static function checkTtl(float $ttl): void
    {
        if (!($ttl > 0)) {
            throw new InvalidArgumentException(sprintf('LeaseSemaphoreStore: the ttl must be a number of seconds > 0, got %s.', var_export($ttl, true)));
        }
    }
}
