<?php
// The bridge's provider is not listed: package discovery finds it in the base path's
// vendor/composer/installed.json, made by the test from bridge/composer.json.
return [
    'name' => 'bridge-test',
    'env' => 'production',
    'debug' => false,
    'timezone' => 'UTC',
    'providers' => [
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Redis\RedisServiceProvider::class,
        Illuminate\Session\SessionServiceProvider::class,
        BridgeTest\AppServiceProvider::class,
    ],
    'aliases' => [],
];
