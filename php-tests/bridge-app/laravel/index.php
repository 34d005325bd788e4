<?php
/*
 * A minimal Laravel application (Debian's php-laravel-framework: 8.83, 10.48, 13.31) for the bridge's tests, served
 * by php-fpm: Foundation's Application and HTTP kernel with its bootstrappers (configuration, package
 * discovery, providers), the StartSession middleware and the routes in routes.php.
 *
 * Its base path is a temp directory the test makes (FastCGI param APP_BASE): config -> this config/,
 * vendor/composer/installed.json (where package discovery finds the bridge's provider, as Composer
 * would list it), bootstrap/cache and storage. Other params pick the session driver and the Redis.
 */
require 'Illuminate/autoload.php'; // Debian's autoloader, from the include_path (/usr/share/php)
require __DIR__ . '/../../../bridge/autoload.php';
require __DIR__ . '/app.inc';

$app = new Illuminate\Foundation\Application($_SERVER['APP_BASE']);
// Laravel 11+ merges the framework's own config/ under the app's; Debian's package moves that directory
// (to Illuminate/config) without patching the path that finds it. This app's config/ is complete.
if (method_exists($app, 'dontMergeFrameworkConfiguration')) {
    $app->dontMergeFrameworkConfiguration();
}
$app->singleton(Illuminate\Contracts\Http\Kernel::class, BridgeTest\Kernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, BridgeTest\ExceptionHandler::class);

$kernel = $app->make(Illuminate\Contracts\Http\Kernel::class);
$request = Illuminate\Http\Request::capture();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
