<?php
// Per request, from FastCGI params (env() reads $_SERVER): the driver under test and its Redis.
return [
    'driver' => env('APP_SESSION_DRIVER', 'redis_lease'),
    'lifetime' => (int) env('APP_SESSION_LIFETIME', 120),
    'expire_on_close' => false,
    'encrypt' => false,
    'files' => env('APP_BASE') . '/storage/sessions',
    'connection' => 'default',
    'store' => env('APP_SESSION_STORE'),
    // No garbage collection during the races.
    'lottery' => [0, 100],
    'cookie' => 'laravel_session',
    'path' => '/',
    'domain' => null,
    'secure' => false,
    'http_only' => true,
    'same_site' => 'lax',
    // The redis_lease driver's Redis (null would mean the ini setting redis_lease.dsn).
    'dsn' => env('APP_LEASE_DSN'),
    // 'redis': the redis_lease driver keeps sessions where and as the redis driver does.
    'lease_compat' => env('APP_SESSION_COMPAT'),
    // Route::block() takes its lock from this cache store.
    'block_store' => 'leases',
];
