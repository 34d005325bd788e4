<?php
// The package's PSR-4 mapping for installs without Composer (Debian's frameworks under /usr/share/php,
// and this repository's tests). With Composer, composer.json's "autoload" does the same.
spl_autoload_register(static function (string $class): void {
    $prefix = 'RedisLease\\Bridge\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
