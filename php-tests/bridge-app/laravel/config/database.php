<?php
return [
    'redis' => [
        'client' => 'phpredis',
        // A phpredis serializer on the connection, when a test asks for one (lease_compat refuses it).
        'options' => ['prefix' => env('APP_REDIS_PREFIX', '')]
            + (env('APP_REDIS_SERIALIZER') === null ? [] : ['serializer' => (int) env('APP_REDIS_SERIALIZER')]),
        'default' => ['host' => '127.0.0.1', 'port' => (int) env('APP_REDIS_PORT', 6379), 'database' => 0],
    ],
];
