<?php
return [
    'default' => 'array',
    'stores' => [
        'array' => ['driver' => 'array'],
        'leases' => [
            'driver' => 'redis_lease',
            'dsn' => env('APP_LEASE_DSN'),
            'values' => 'array',
            'unbounded_ttl' => 120,
            'renew_ttl' => 3,
        ],
        // Laravel's own, through phpredis.
        'redis' => ['driver' => 'redis', 'connection' => 'default'],
        // A store of its own for sessions (session.store), under its own prefix.
        'sessions' => ['driver' => 'redis', 'connection' => 'default', 'prefix' => 'bridge_sessions'],
    ],
    'prefix' => env('APP_CACHE_PREFIX', 'bridge_test'),
];
