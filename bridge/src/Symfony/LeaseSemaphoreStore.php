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
 * The permit lives in the DistributedSemaphore object kept in the Key's state, because the extension
 * cannot yet hand a permit from one object to another (DistributedSemaphore has no restore() and no
 * detach()). Hence, unlike Symfony's RedisStore:
 * - the permit ends when the Key object goes (or at the end of the request or process), even with
 *   `autoRelease: false`, if it has not been released or expired before;
 * - a Key holding a permit cannot be serialized (PHP refuses to serialize the DistributedSemaphore in
 *   its state), so it cannot carry its permit to another process (Messenger).
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
        $key->setState(__CLASS__, $permit);
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
        $permit = $this->permit($key);
        if ($permit === null) {
            return;
        }
        $permit->release();
        $key->removeState(__CLASS__);
    }

    /** Whether the Key holds a permit now (one question to Redis). */
    public function exists(Key $key): bool
    {
        return $this->permit($key)?->isAcquired() ?? false;
    }

    private function extendOwn(Key $key, float $ttl): bool
    {
        return $this->permit($key)?->refresh($ttl) ?? false;
    }

    private function permit(Key $key): ?DistributedSemaphore
    {
        return $key->hasState(__CLASS__) ? $key->getState(__CLASS__) : null;
    }

    private static function checkTtl(float $ttl): void
    {
        if (!($ttl > 0)) {
            throw new InvalidArgumentException(sprintf('LeaseSemaphoreStore: the ttl must be a number of seconds > 0, got %s.', var_export($ttl, true)));
        }
    }
}
