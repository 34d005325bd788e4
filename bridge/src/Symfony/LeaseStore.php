<?php

namespace RedisLease\Bridge\Symfony;

use DistributedLock;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
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
 * Blocking acquires (`acquire(true)`, `acquireRead(true)`) wait in the extension's FIFO queue and are
 * handed the lock by the release, instead of Symfony's 100 ms polling.
 *
 * Shared locks (`acquireRead()`) are the extension's read holds: readers share the lock, a writer has
 * it alone, and a reader arriving while a writer waits queues behind it. The Key keeps one hold, read
 * or write: `acquire()` on a Key holding a read lock upgrades it and `acquireRead()` on one holding a
 * write lock downgrades it, both done by the extension on the same token, so nobody gets in between.
 * An upgrade that would deadlock (another reader of the lock is upgrading too) is refused at once:
 * `acquire()` returns false, `acquire(true)` throws LockConflictedException, and the Key keeps its
 * read lock.
 */
final class LeaseStore implements BlockingStoreInterface, BlockingSharedLockStoreInterface
{
    /** Wrapped: dumps, traces and serialize() never show the password it may carry. */
    private ?\SensitiveParameterValue $dsn;

    /**
     * Where this store keeps a Key's token in its state: one slot per Redis, so that stores of
     * several Redis servers in one CombinedStore each keep their own (each Redis hands out its own
     * token). Named after the Redis, never with a secret (see slot()).
     */
    private ?string $slot = null;

    /** The longest wait DistributedLock::acquire() takes (30 days): blocking saves wait in such turns. */
    private const MAX_WAIT = 2592000.0;

    /**
     * @param string|null $dsn Redis, as for DistributedLock; null: the ini setting redis_lease.dsn.
     * @param float $initialTtl Lease of a newly taken lock, until Symfony's Lock sets its own ttl
     *        (it calls putOffExpiration() right after), as RedisStore's $initialTtl.
     */
    public function __construct(#[\SensitiveParameter] ?string $dsn = null, private float $initialTtl = 300.0)
    {
        $this->dsn = $dsn === null ? null : new \SensitiveParameterValue($dsn);
        self::checkTtl($initialTtl, 'the initial ttl');
    }

    /**
     * Takes the lock alone if it is free; extends it if this Key holds it alone already, or upgrades
     * this Key's read lock if no other reader holds the lock.
     */
    public function save(Key $key): void
    {
        $this->trySave($key, false);
    }

    /**
     * Takes the lock as a reader unless a writer holds it (or is first in line); extends this Key's
     * read lock, or downgrades its write lock.
     */
    public function saveRead(Key $key): void
    {
        $this->trySave($key, true);
    }

    /** Waits for the lock, however long, queued: the holder's release hands it over. */
    public function waitAndSave(Key $key): void
    {
        $this->waitAndSaveAs($key, false);
    }

    /** Waits to read, however long, queued behind the writers that came first. */
    public function waitAndSaveRead(Key $key): void
    {
        $this->waitAndSaveAs($key, true);
    }

    /** Extends the lock (read or write) to `$ttl` seconds from now, if this Key still holds it. */
    public function putOffExpiration(Key $key, float $ttl): void
    {
        self::checkTtl($ttl, 'the ttl');
        $key->reduceLifetime($ttl);
        if (!$this->extendOwn($key, $ttl)) {
            throw new LockConflictedException();
        }
        $this->checkNotExpired($key);
    }

    /** Releases the lock (read or write) if this Key holds it; nothing if it does not. */
    public function delete(Key $key): void
    {
        $token = $this->token($key);
        if ($token === null) {
            return;
        }
        DistributedLock::restore((string) $key, $token, $this->initialTtl, $this->dsn?->getValue())->release();
        $this->keep($key, null);
    }

    /** Whether this Key holds the lock now, as a reader or a writer (one question to Redis). */
    public function exists(Key $key): bool
    {
        $token = $this->token($key);
        if ($token === null) {
            return false;
        }
        $lock = DistributedLock::restore((string) $key, $token, $this->initialTtl, $this->dsn?->getValue());
        try {
            return $lock->isAcquired();
        } finally {
            // The check must never release the hold when the object goes.
            $lock->detach();
        }
    }

    private function trySave(Key $key, bool $read): void
    {
        $key->reduceLifetime($this->initialTtl);
        if (!$this->claim($key, $read, 0.0)) {
            throw new LockConflictedException();
        }
        $this->checkNotExpired($key);
    }

    private function waitAndSaveAs(Key $key, bool $read): void
    {
        while (!$this->claim($key, $read, self::MAX_WAIT)) {
            if ($this->token($key) !== null) {
                // A refused upgrade: the Key still reads, and waiting would deadlock with the other upgrader.
                throw new LockConflictedException();
            }
        }
        // The lease started when it was handed over, just now.
        $key->resetLifetime();
        $key->reduceLifetime($this->initialTtl);
        $this->checkNotExpired($key);
    }

    /**
     * Takes the lock (as a reader with `$read`) within `$wait` seconds, or extends or converts the
     * Key's hold, and keeps the resulting token in the Key; the hold outlives this call.
     */
    private function claim(Key $key, bool $read, float $wait): bool
    {
        $token = $this->token($key);
        if ($token === null) {
            $lock = new DistributedLock((string) $key, $this->initialTtl, $this->dsn?->getValue());
            if (!($read ? $lock->acquireRead($wait) : $lock->acquire($wait))) {
                return false;
            }
            $this->keep($key, $lock->detach());
            return true;
        }
        // The conversion is the extension's, on the Key's own token: no release and retake in between.
        $lock = DistributedLock::restore((string) $key, $token, $this->initialTtl, $this->dsn?->getValue());
        try {
            return $read ? $lock->acquireRead($wait) : $lock->acquire($wait);
        } finally {
            // Whatever came of it, the hold (the Key's own, a fresh one after a lost one, or none)
            // belongs to the Key, never to this object's destructor.
            $this->keep($key, $lock->detach());
        }
    }

    /** Extends the Key's hold to `$ttl`; false when it has none or lost it. */
    private function extendOwn(Key $key, float $ttl): bool
    {
        $token = $this->token($key);
        if ($token === null) {
            return false;
        }
        $lock = DistributedLock::restore((string) $key, $token, $ttl, $this->dsn?->getValue());
        try {
            return $lock->refresh($ttl);
        } finally {
            $lock->detach();
        }
    }

    /**
     * The token of the hold this store keeps in `$key` (for `DistributedLock::restore()`: its fencing
     * token, inspection), or null when it keeps none.
     */
    public function tokenOf(Key $key): ?string
    {
        return $this->token($key);
    }

    /**
     * This store's token in `$key`: its own slot's, else the slot every store shared before (a Key
     * serialized by an earlier version). Another store's token found there names nothing on this
     * Redis (tokens are random): restored here, it holds nothing, and a claim takes a fresh hold.
     */
    private function token(Key $key): ?string
    {
        foreach (array_unique([$this->slot(), __CLASS__]) as $slot) {
            if ($key->hasState($slot)) {
                return $key->getState($slot);
            }
        }
        return null;
    }

    /**
     * Keeps `$token` (null: none) in `$key`: in this store's slot, and in the shared one, which an
     * earlier version of this bridge reads (a rolling deploy: a Key handed to an old worker still
     * finds its token there; with several stores it holds the last one's, and only old workers read
     * it).
     */
    private function keep(Key $key, #[\SensitiveParameter] ?string $token): void
    {
        $slots = array_unique([$this->slot(), __CLASS__]);
        if ($token === null) {
            $own = $key->hasState($slots[0]) ? $key->getState($slots[0]) : null;
            $key->removeState($slots[0]);
            if ($own === null || ($key->hasState(__CLASS__) && $key->getState(__CLASS__) === $own)) {
                $key->removeState(__CLASS__);
            }
            return;
        }
        foreach ($slots as $slot) {
            $key->setState($slot, $token);
        }
    }

    /**
     * A lease of `$ttl` seconds is one the extension takes (> 0, at most 30 days): else Symfony's
     * InvalidTtlException, which Lock's wrappers catch, not the extension's ValueError (an \Error,
     * which they let through).
     */
    private static function checkTtl(float $ttl, string $what): void
    {
        if (!($ttl > 0) || $ttl > self::MAX_WAIT) {
            throw new InvalidTtlException(sprintf('LeaseStore: %s must be a number of seconds > 0 and at most 2592000 (30 days), got %s.', $what, var_export($ttl, true)));
        }
    }

    /**
     * The state slot of this store (see `$slot`): named after the Redis its DSN names, as the
     * extension tells it (`DistributedLock::server()`: the same for every spelling of one Redis,
     * never a secret), so that a Key serialized in one process finds its token in another.
     */
    private function slot(): string
    {
        // An extension without server() (older than this bridge): the shared slot alone, as before.
        return $this->slot ??= method_exists(DistributedLock::class, 'server')
            ? __CLASS__ . '@' . DistributedLock::server($this->dsn?->getValue())
            : __CLASS__;
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
