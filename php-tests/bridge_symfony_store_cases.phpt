--TEST--
Bridge, Symfony's own store test cases against our stores (runs where PHPUnit and Symfony 7+ are: scripts/cells.sh's newest-frameworks pass): Lock's AbstractStoreTestCase with its expiring, blocking and shared-lock traits against LeaseStore; Semaphore's AbstractStoreTestCase (limits and weights) against LeaseSemaphoreStore; every test case runs and passes
--SKIPIF--
<?php
require __DIR__ . '/bridge-app/skipif.inc';
$missing = array_filter(['PHPUnit/Autoload.php', 'Symfony/Component/Lock/Test/AbstractStoreTestCase.php'],
    static fn (string $f): bool => stream_resolve_include_path($f) === false);
// In the newest-frameworks pass (RL_FRAMEWORKS set) nothing is skipped: what is missing fails the test.
if (($missing || getenv('SYMFONY_STORE_TESTS') === false) && getenv('RL_FRAMEWORKS') === false) {
    echo 'skip needs PHPUnit, Symfony 7+ and SYMFONY_STORE_TESTS (missing: ', implode(', ', $missing) ?: 'SYMFONY_STORE_TESTS',
        '); scripts/cells.sh runs it on the newest Symfony Debian serves';
}
?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';

$srv = rl_start_redis();
$junit = rl_tempfile('.xml');
rl_on_cleanup(static fn () => @unlink("$junit.json"));
// PHPUnit in a child PHP with the extension, as run-tests runs this test, and the modules PHPUnit and
// the blocking test (fork, signals) need.
$modules = '';
foreach (['ctype', 'dom', 'mbstring', 'posix', 'simplexml', 'tokenizer', 'xml', 'xmlwriter'] as $m) {
    if (!extension_loaded($m)) {
        $modules .= ' -d extension=' . $m;
    }
}
$runner = rl_tempfile('.php');
// What Debian's /usr/bin/phpunit does, with PHPUnit from the include_path; then each test case's outcome
// from its JUnit log, by name, as JSON.
file_put_contents($runner, <<<'PHP'
    <?php
    define('PHPUNIT_COMPOSER_INSTALL', stream_resolve_include_path('PHPUnit/Autoload.php'));
    require PHPUNIT_COMPOSER_INSTALL;
    $status = (new PHPUnit\TextUI\Application())->run($argv);
    $results = [];
    foreach (simplexml_load_file(getenv('JUNIT'))->xpath('//testcase') as $case) {
        $name = substr(strrchr((string) $case['class'], '\\'), 1) . '::' . $case['name'];
        $results[$name] = isset($case->failure) || isset($case->error) ? 'failed' : (isset($case->skipped) ? 'skipped' : 'passed');
    }
    file_put_contents(getenv('JUNIT') . '.json', json_encode($results));
    exit($status);
    PHP);
$cmd = 'REDIS_LEASE_TEST_DSN=' . escapeshellarg($srv['dsn']) . ' JUNIT=' . escapeshellarg($junit) . ' ' . rl_php_cmd() . $modules . ' -d date.timezone=UTC ' . escapeshellarg($runner)
    . ' --bootstrap ' . escapeshellarg(BR_BRIDGE . '/tests/bootstrap.php') . ' --do-not-cache-result'
    . ' --log-junit ' . escapeshellarg($junit) . ' ' . escapeshellarg(BR_BRIDGE . '/tests/Symfony') . ' 2>&1';
exec($cmd, $out, $status);
$summary = trim((string) end($out));
printf("info: %s: %s\n", $out[0] ?? '?', $summary);
rl_same('PHPUnit exits 0', 0, $status);
if ($status !== 0) {
    echo implode("\n", array_slice($out, 0, 80)), "\n";
}

// Every test case, by name, with its outcome: a trait that did not load or a test that was skipped shows.
$results = json_decode((string) @file_get_contents("$junit.json"), true) ?: [];
ksort($results);
foreach ($results as $name => $result) {
    rl_same($name, 'passed', $result);
}
echo "done\n";
?>
--EXPECTF--
info: %s
ok: PHPUnit exits 0
ok: LeaseSemaphoreStoreTest::testPutOffExpiration
ok: LeaseSemaphoreStoreTest::testPutOffExpirationWhenSaveHasNotBeenCalled
ok: LeaseSemaphoreStoreTest::testSaveExistAndDelete
ok: LeaseSemaphoreStoreTest::testSaveTwice
ok: LeaseSemaphoreStoreTest::testSaveWithDifferentKeysOnSameResource
ok: LeaseSemaphoreStoreTest::testSaveWithDifferentResources
ok: LeaseSemaphoreStoreTest::testSaveWithLimitAt2
ok: LeaseSemaphoreStoreTest::testSaveWithWeightAndLimitAt3
ok: LeaseStoreTest::testAbortAfterExpiration
ok: LeaseStoreTest::testBlockingLocks
ok: LeaseStoreTest::testDeleteIsolated
ok: LeaseStoreTest::testExpiration
ok: LeaseStoreTest::testExpiredLockCleaned
ok: LeaseStoreTest::testRefreshLock
ok: LeaseStoreTest::testSave
ok: LeaseStoreTest::testSaveTwice
ok: LeaseStoreTest::testSaveWithDifferentKeysOnSameResources
ok: LeaseStoreTest::testSaveWithDifferentResources
ok: LeaseStoreTest::testSetExpiration
ok: LeaseStoreTest::testSharedLockDemote
ok: LeaseStoreTest::testSharedLockPromote
ok: LeaseStoreTest::testSharedLockPromoteAllowed
ok: LeaseStoreTest::testSharedLockReadFirst
ok: LeaseStoreTest::testSharedLockWriteFirst
done
