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
 * A Key's weight is how many permits it takes: the extension takes them at once, as one hold (one
 * token, released and renewed as one), so two Keys never each get part of what they need.
 *
 * The Key keeps only the permit's token, as Symfony's RedisStore does: the permit outlives the Semaphore
 * and the Key objects (with `autoRelease: false`) until its ttl, and a serialized Key carries it to another
 * process, where delete(), putOffExpiration() and exists() act on it by its token.
 */
final class LeaseSemaphoreStore implements PersistingStoreInterface
{
    /** Wrapped: dumps, traces and serialize() never show the password it may carry. */
    private ?\SensitiveParameterValue $dsn;

    /**
     * @param string|null $dsn Redis, as for DistributedSemaphore; null: the ini setting redis_lease.dsn.
     */
    public function __construct(#[\SensitiveParameter] ?string $dsn = null)
    {
        $this->dsn = $dsn === null ? null : new \SensitiveParameterValue($dsn);
    }

    /**
     * Takes the Key's weight in permits for `$ttlInSecond` seconds if they all fit under the Key's
     * limit, or extends the Key's own hold to that.
     *
     * @throws SemaphoreAcquiringException when they do not all fit.
     * @throws InvalidArgumentException for a weight above the limit, or a ttl that is not > 0.
     */
    public function save(Key $key, float $ttlInSecond): void
    {
        self::checkTtl($ttlInSecond);
        if ($key->getWeight() < 1 || $key->getWeight() > $key->getLimit()) {
            throw new InvalidArgumentException(sprintf('The weight of the "%s" semaphore must be between 1 and its limit %d, got %d.', $key, $key->getLimit(), $key->getWeight()));
        }
        if ($this->extendOwn($key, $ttlInSecond)) {
            return;
        }
        $permit = new DistributedSemaphore((string) $key, $key->getLimit(), $ttlInSecond, $this->dsn?->getValue());
        if (!$permit->acquire(0.0, $key->getWeight())) {
            throw new SemaphoreAcquiringException($key, sprintf('%d of its %d permits are not free', $key->getWeight(), $key->getLimit()));
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
        return DistributedSemaphore::restore((string) $key, $key->getLimit(), $key->getState(__CLASS__), $ttl, $this->dsn?->getValue());
    }

    private static function checkTtl(float $ttl): void
    {
        // The extension's longest lease is 30 days: a longer one is this store's exception (caught by
        // Semaphore's wrappers), not the extension's ValueError, an \Error they let through.
        if (!($ttl > 0) || $ttl > 2592000.0) {
            throw new InvalidArgumentException(sprintf('LeaseSemaphoreStore: the ttl must be a number of seconds > 0 and at most 2592000 (30 days), got %s.', var_export($ttl, true)));
        }
    }
}
