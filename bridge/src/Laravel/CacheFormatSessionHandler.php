<?php

namespace RedisLease\Bridge\Laravel;

use SessionHandlerInterface;

/**
 * Sessions stored as Laravel's `redis` session driver stores them: its driver keeps a session in the
 * `redis` cache store, which serialize()s the session's payload once more. Around a
 * RedisLockingSessionHandler whose prefix is that store's key prefix, old workers (Laravel's driver)
 * and new ones (redis_lease) read and write the same keys in the same format during a rolling deploy.
 * Session config `'lease_compat' => 'redis'` makes the `redis_lease` driver one of these.
 */
final class CacheFormatSessionHandler implements SessionHandlerInterface
{
    public function __construct(private SessionHandlerInterface $handler)
    {
    }

    public function open(string $path, string $name): bool
    {
        return $this->handler->open($path, $name);
    }

    public function close(): bool
    {
        return $this->handler->close();
    }

    /** The payload; data not in the cache store's format (written without this wrapper) as it is. */
    public function read(#[\SensitiveParameter] string $id): string|false
    {
        $stored = $this->handler->read($id);
        if (!is_string($stored) || $stored === '') {
            return $stored;
        }
        // The cache store's serialize() of a string (numbers it stores as they are).
        $payload = @unserialize($stored, ['allowed_classes' => false]);
        return is_string($payload) ? $payload : $stored;
    }

    public function write(#[\SensitiveParameter] string $id, #[\SensitiveParameter] string $data): bool
    {
        return $this->handler->write($id, is_numeric($data) ? $data : serialize($data));
    }

    public function destroy(#[\SensitiveParameter] string $id): bool
    {
        return $this->handler->destroy($id);
    }

    public function gc(int $max_lifetime): int|false
    {
        return $this->handler->gc($max_lifetime);
    }

    /** The wrapped handler (the RedisLockingSessionHandler). */
    public function getHandler(): SessionHandlerInterface
    {
        return $this->handler;
    }
}
