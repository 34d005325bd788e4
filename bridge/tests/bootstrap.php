<?php
/*
 * PHPUnit bootstrap of the bridge's Symfony store tests: Symfony's own store test cases run against
 * LeaseStore and LeaseSemaphoreStore. From the include_path (Debian's packages): PHPUnit and Symfony's
 * Lock and Semaphore, whose packages ship Lock's AbstractStoreTestCase (7.x and 8.x). The rest of
 * Symfony's store test cases are not packaged: SYMFONY_STORE_TESTS names a directory with them, as
 * Symfony's source has them (src/Symfony/Component/{Lock,Semaphore}/Tests/Store/*.php), unchanged.
 * REDIS_LEASE_TEST_DSN: the Redis they run against.
 */
require 'Symfony/Component/Lock/autoload.php';
require 'Symfony/Component/Semaphore/autoload.php';
require __DIR__ . '/../autoload.php';

$sources = getenv('SYMFONY_STORE_TESTS');
if ($sources === false || !is_dir($sources)) {
    fwrite(STDERR, "SYMFONY_STORE_TESTS must name the directory of Symfony's store test cases\n");
    exit(2);
}
foreach (['Lock/Tests/Store/ExpiringStoreTestTrait.php', 'Lock/Tests/Store/BlockingStoreTestTrait.php',
    'Lock/Tests/Store/SharedLockStoreTestTrait.php',
    'Semaphore/Tests/Store/AbstractStoreTestCase.php'] as $file) {
    require "$sources/$file";
}
if (getenv('REDIS_LEASE_TEST_DSN') === false) {
    fwrite(STDERR, "REDIS_LEASE_TEST_DSN must name the Redis to test against\n");
    exit(2);
}
