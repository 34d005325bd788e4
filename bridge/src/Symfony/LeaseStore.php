<?php

namespace RedisLease\Bridge\Symfony;

use DistributedLock;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Key;

/**
 * A Symfony Lock store whose locks are redis_lease leases: `new LockFactory(new LeaseStore($dsn))`.
 *
 * The hold's token is kept in the Key's state, so a Key serialized with the lock
 * (`createLock(..., autoRelease: false)`, Messenger) can be refreshed and released in another process.
 * A hold is detached from its DistributedLock as soon as it is taken: as with Symfony's RedisStore,
 * it lives until its ttl or its release, not until this process ends.
 *
 * Blocking acquires (`acquire(true)`) wait in the extension's FIFO queue and are handed the lock by the
 * release, instead of Symfony's 100 ms polling.
 *
 * Shared (read) locks: not yet. SharedLockStoreInterface (saveRead) and
 * BlockingSharedLockStoreInterface (waitAndSaveRead) belong here once the extension has read leases;
 * until then Symfony's Lock::acquireRead() takes an exclusive lock on this store (its documented
 * fallback for stores without shared locks).
 */
final class LeaseStore implements BlockingStoreInterface
{
    /** The longest wait DistributedLock::acquire() takes (30 days): waitAndSave() waits in such turns. */
    private const MAX_WAIT = 2592000.0;

    /**
     * @param string|null $dsn Redis, as for DistributedLock; null: the ini setting redis_lease.dsn.
     * @param float $initialTtl Lease of a newly taken lock, until Symfony's Lock sets its own ttl
     *        (it calls putOffExpiration() right after), as RedisStore's $initialTtl.
     */
    public function __construct(#[\SensitiveParameter] private ?string $dsn = null, private float $initialTtl = 300.0)
    {
        if (!($initialTtl > 0)) {
            throw new InvalidTtlException(sprintf('LeaseStore: the initial ttl must be a number of seconds > 0, got %s.', var_export($initialTtl, true)));
        }
    }

    /** Takes the lock if it is free, or extends it if this Key holds it already. */
    public function save(Key $key): void
    {
        $key->reduceLifetime($this->initialTtl);
        if (!$this->extendOwn($key, $this->initialTtl) && !$this->take($key, 0.0)) {
            throw new LockConflictedException();
        }
        $this->checkNotExpired($key);
    }

    /** Waits for the lock, however long, queued: the holder's release hands it over. */
    public function waitAndSave(Key $key): void
    {
        if (!$this->extendOwn($key, $this->initialTtl)) {
            while (!$this->take($key, self::MAX_WAIT)) {
            }
        }
        // The lease started when it was handed over, just now.
        $key->resetLifetime();
        $key->reduceLifetime($this->initialTtl);
        $this->checkNotExpired($key);
    }

    /** Extends the lock to `$ttl` seconds from now, if this Key still holds it. */
    public function putOffExpiration(Key $key, float $ttl): void
    {
        $key->reduceLifetime($ttl);
        if (!$this->extendOwn($key, $ttl)) {
            throw new LockConflictedException();
        }
        $this->checkNotExpired($key);
    }

    /** Releases the lock if this Key holds it; nothing if it does not. */
    public function delete(Key $key): void
    {
        $token = $this->token($key);
        if ($token === null) {
            return;
        }
        DistributedLock::restore((string) $key, $token, $this->initialTtl, $this->dsn)->release();
        $key->removeState(__CLASS__);
    }

    /** Whether this Key holds the lock now (one question to Redis). */
    public function exists(Key $key): bool
    {
        $token = $this->token($key);
        if ($token === null) {
            return false;
        }
        $lock = DistributedLock::restore((string) $key, $token, $this->initialTtl, $this->dsn);
        try {
            return $lock->isAcquired();
        } finally {
            // The check must never release the hold when the object goes.
            $lock->detach();
        }
    }

    /** Takes the lock within `$wait` seconds and keeps its token in the Key; the hold outlives this call. */
    private function take(Key $key, float $wait): bool
    {
        $lock = new DistributedLock((string) $key, $this->initialTtl, $this->dsn);
        if (!$lock->acquire($wait)) {
            return false;
        }
        $key->setState(__CLASS__, $lock->detach());
        return true;
    }

    /** Extends the Key's hold to `$ttl`; false when it has none or lost it. */
    private function extendOwn(Key $key, float $ttl): bool
    {
        $token = $this->token($key);
        if ($token === null) {
            return false;
        }
        $lock = DistributedLock::restore((string) $key, $token, $ttl, $this->dsn);
        $extended = $lock->refresh($ttl);
        $lock->detach();
        return $extended;
    }

    private function token(Key $key): ?string
    {
        return $key->hasState(__CLASS__) ? $key->getState(__CLASS__) : null;
    }

    /** As Symfony's expiring stores: a lock whose lifetime ran out while taking it is given back. */
    private function checkNotExpired(Key $key): void
    {
        if ($key->isExpired()) {
            try {
                $this->delete($key);
            } catch (\Exception) {
                // The expiry is what the caller must hear about.
            }
            throw new LockExpiredException(sprintf('Failed to store the "%s" lock.', $key));
        }
    }
}
