<?php
return [
    'redis' => [
        'client' => 'phpredis',
        'options' => ['prefix' => env('APP_REDIS_PREFIX', '')],
        'default' => ['host' => '127.0.0.1', 'port' => (int) env('APP_REDIS_PORT', 6379), 'database' => 0],
    ],
];
