<?php

namespace RedisLease\Bridge\Laravel;

use DistributedLock;
use Illuminate\Cache\Lock;
use Illuminate\Contracts\Cache\LockTimeoutException;

/**
 * A Laravel cache lock that is a redis_lease DistributedLock.
 *
 * A Laravel lock outlives its PHP object: get() without a callback keeps the lock until its ttl or a
 * release by its owner, in this process or another (restoreLock($name, $owner)->release()). So a hold
 * taken without a callback is detached from its DistributedLock at once and released by its token;
 * owner() is that token. A hold taken with a callback (get($cb), block($s, $cb)) lives in a
 * DistributedLock object for the callback's duration and is released when it returns or throws.
 *
 * Laravel's `$seconds = 0` means "no expiry". Here it never does:
 * - with a callback, the lock is renewed by the extension's watchdog while this process runs the
 *   callback, with a short lease (`renew_ttl`), so a killed worker frees it within that lease;
 * - without a callback (ShouldBeUnique's lock, WithoutOverlapping, the scheduler's mutexes, a manual
 *   get()), nothing is alive to renew it: it lives `unbounded_ttl` seconds (a day by default, as the
 *   scheduler's own withoutOverlapping() expiry), unless released before.
 * A positive `$seconds` is the lease, never renewed (Laravel's meaning: the lock ends by then).
 *
 * Waiting (block()) is the extension's FIFO queue with handoff, not polling:
 * betweenBlockedAttemptsSleepFor() is accepted and has nothing to tune.
 */
class LeaseLock extends Lock
{
    /** Wrapped: dumps, traces and serialize() never show the password it may carry. */
    private ?\SensitiveParameterValue $dsn;

    /** The DistributedLock holding the lock while a callback runs; null otherwise. */
    private ?DistributedLock $held = null;

    /**
     * @param string $name The lock key (the store's prefix included).
     * @param int|float $seconds Laravel's lock seconds; 0 (or less): no bound given.
     * @param string|null $owner A token from owner(), for a restored lock; null for a new one. Another
     *        owner (Cache::funnel() gives its own) names no hold: acquiring replaces it with the token.
     */
    public function __construct(
        $name,
        $seconds,
        #[\SensitiveParameter] $owner,
        #[\SensitiveParameter] ?string $dsn,
        private float $unboundedTtl,
        private float $renewTtl,
    ) {
        parent::__construct($name, $seconds, $owner);
        $this->dsn = $dsn === null ? null : new \SensitiveParameterValue($dsn);
        // Laravel makes up a random owner; ours is the DistributedLock token, known once acquired.
        $this->owner = $owner;
    }

    /**
     * Takes the lock if it is free, for `$seconds` (or `unbounded_ttl`), and lets it outlive this
     * object: it ends at its ttl, or by release() here or with restoreLock($name, owner()) anywhere.
     */
    public function acquire()
    {
        return $this->take(0.0);
    }

    /**
     * @param callable|null $callback Run while holding the lock, which is released after it.
     * @return mixed false when the lock is held elsewhere; else the callback's result, or true.
     */
    public function get($callback = null)
    {
        if (!is_callable($callback)) {
            return $this->acquire();
        }
        $lock = $this->heldLock();
        if (!$lock->acquire()) {
            return false;
        }
        return $this->runHolding($lock, $callback);
    }

    /**
     * Waits up to `$seconds` for the lock in the extension's queue: a release hands it straight to
     * the longest waiter, so there is no polling interval.
     *
     * @throws LockTimeoutException when another holder still has it after `$seconds`.
     */
    public function block($seconds, $callback = null)
    {
        $wait = max(0.0, (float) $seconds);
        if (!is_callable($callback)) {
            if (!$this->take($wait)) {
                throw new LockTimeoutException();
            }
            return true;
        }
        $lock = $this->heldLock();
        if (!$lock->acquire($wait)) {
            throw new LockTimeoutException();
        }
        return $this->runHolding($lock, $callback);
    }

    /**
     * Releases the lock if this object's owner still holds it.
     *
     * @return bool false when it was not held by this owner (expired, released, or never taken).
     */
    public function release()
    {
        if ($this->held !== null) {
            $lock = $this->held;
            $this->held = null;
            return $lock->release();
        }
        if (!self::isToken($this->owner)) {
            return false;
        }
        return $this->restore()->release();
    }

    /**
     * Releases the lock whoever holds it, and hands it to the first waiter at once.
     */
    public function forceRelease()
    {
        DistributedLock::forceRelease($this->name, $this->dsn?->getValue());
    }

    /**
     * Extends the lock to `$seconds` from now (Laravel 12's refresh()), if this owner still holds it.
     * Null or 0 extends it to its own lease (never to "no expiry", see the class comment).
     */
    public function refresh($seconds = null)
    {
        $ttl = $seconds !== null && $seconds > 0 ? (float) $seconds : null;
        if ($this->held !== null) {
            return $this->held->refresh($ttl);
        }
        if (!self::isToken($this->owner)) {
            return false;
        }
        $lock = $this->restore();
        try {
            return $lock->refresh($ttl);
        } finally {
            // The hold goes on living without this object, as it did before,
            // also when the refresh threw (dropped, the object would release it).
            $lock->detach();
        }
    }

    /**
     * The token of the hold this object took (or was restored with): for restoreLock() elsewhere.
     * Null before it took one.
     */
    public function owner()
    {
        return $this->owner;
    }

    /**
     * Whether anyone holds the lock now (Laravel 13's isLocked()), without taking it. One read of Redis.
     */
    public function isLocked(): bool
    {
        return DistributedLock::isLocked($this->name, $this->dsn?->getValue());
    }

    /**
     * Whether `$owner` (a token from owner()) holds the lock now. One question to Redis.
     */
    public function isOwnedBy(#[\SensitiveParameter] $owner)
    {
        if (!is_string($owner)) {
            return false;
        }
        if ($owner === $this->owner) {
            return $this->getCurrentOwner() === $owner;
        }
        if (!self::isToken($owner)) {
            return false;
        }
        return self::holds(DistributedLock::restore($this->name, $owner, $this->lease(), $this->dsn?->getValue()));
    }

    /**
     * Our owner if it still holds the lock, else null. The extension does not tell who else holds a
     * lock, so this is never another owner's token.
     */
    protected function getCurrentOwner()
    {
        if ($this->held !== null) {
            return $this->held->isAcquired() ? $this->owner : null;
        }
        if (!self::isToken($this->owner)) {
            return null;
        }
        return self::holds($this->restore()) ? $this->owner : null;
    }

    /**
     * Whether a restored hold is still held (one question to Redis), leaving it as it was: detached,
     * so that this check never releases it when the object goes.
     */
    private static function holds(DistributedLock $lock): bool
    {
        try {
            return $lock->isAcquired();
        } finally {
            $lock->detach();
        }
    }

    /** Takes the lock within `$wait` seconds and lets it outlive this object (see acquire()). */
    private function take(float $wait): bool
    {
        $lock = new DistributedLock($this->name, $this->lease(), $this->dsn?->getValue());
        if (!$lock->acquire($wait)) {
            return false;
        }
        $this->owner = $lock->detach();
        return true;
    }

    /** A DistributedLock for a hold that lives while a callback runs. */
    private function heldLock(): DistributedLock
    {
        return $this->seconds > 0
            ? new DistributedLock($this->name, (float) $this->seconds, $this->dsn?->getValue())
            : new DistributedLock($this->name, $this->renewTtl, $this->dsn?->getValue(), true);
    }

    private function runHolding(DistributedLock $lock, callable $callback): mixed
    {
        $this->held = $lock;
        $this->owner = $lock->getToken();
        try {
            return $callback();
        } finally {
            // Unless the callback released it itself (release() clears $held).
            if ($this->held === $lock) {
                $this->release();
            }
        }
    }

    /**
     * Whether `$owner` is a token the extension hands out (owner()). Another (Laravel's own random
     * owner, in a ShouldBeUnique job queued before the store became this one; one chosen by the
     * caller) names no hold here: released, refreshed or asked about, it holds nothing, as with
     * Laravel's own locks, instead of the extension's ValueError (review, stop 58: the job, run
     * already, failed at its lock's release and ran again).
     */
    private static function isToken(?string $owner): bool
    {
        return $owner !== null && preg_match('/\A[0-9a-f]{32}\z/', $owner) === 1;
    }

    /** The hold of this object's owner, as a DistributedLock that releases it when destroyed. */
    private function restore(): DistributedLock
    {
        return DistributedLock::restore($this->name, $this->owner, $this->lease(), $this->dsn?->getValue());
    }

    /** The lease of a hold that outlives its object: `$seconds`, or `unbounded_ttl` for 0. */
    private function lease(): float
    {
        return $this->seconds > 0 ? (float) $this->seconds : $this->unboundedTtl;
    }
}
