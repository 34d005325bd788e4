--TEST--
stubs/redis_lease.stub.php declares exactly the API the loaded extension exposes (classes, flags, parents, methods, signatures)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/inc/dump_api.php';

$stub = __DIR__ . '/../stubs/redis_lease.stub.php';
if (!rl_ok('stub file exists', is_file($stub), $stub)) {
    echo "done\n";
    exit;
}

// 1. The stub, evaluated by a PHP without the extension (-n: no ini, so the
//    extension cannot be loaded and the stub's declarations do not clash).
$php = getenv('TEST_PHP_EXECUTABLE') ?: PHP_BINARY;
$cmd = escapeshellarg($php) . ' -n ' . escapeshellarg(__DIR__ . '/inc/dump_api.php') . ' stub ' . escapeshellarg($stub) . ' 2>&1';
$json = shell_exec($cmd);
$stubApi = json_decode((string) $json, true);
if (!rl_ok('stub dumps cleanly under php -n', is_array($stubApi), "output: $json")) {
    echo "done\n";
    exit;
}

// 2. The loaded extension: the same names, plus anything else it exposes.
$ext = new ReflectionExtension('redis_lease');
$extClasses = array_keys($ext->getClasses());
$extFunctions = array_map(fn($f) => $f->getName(), array_values($ext->getFunctions()));
$names = array_unique(array_merge(array_keys($stubApi['classes']), $extClasses));
$missingInExt = array_filter($names, fn($c) => !class_exists($c) && !interface_exists($c));
rl_ok('every class in the stub exists in the extension', $missingInExt === [], implode(', ', $missingInExt));
$names = array_values(array_diff($names, $missingInExt));
$fnames = array_unique(array_merge(array_keys($stubApi['functions']), $extFunctions));
$fmissing = array_filter($fnames, fn($f) => !function_exists($f));
rl_ok('every function in the stub exists in the extension', $fmissing === [], implode(', ', $fmissing));
$fnames = array_values(array_diff($fnames, $fmissing));
$extApi = rl_dump_api($names, $fnames);

// The API the spec requires must be in the stub.
foreach (['DistributedLock', 'RedisLease\LeaseException', 'RedisLease\ConnectionException',
          'RedisLease\LockTimeoutException', 'RedisLease\LockLostException'] as $c) {
    rl_ok("stub declares $c", isset($stubApi['classes'][$c]));
}
rl_ok('stub declares RedisLease\metrics', isset($stubApi['functions']['RedisLease\metrics']));
$extra = array_diff($extClasses, array_keys($stubApi['classes']));
rl_ok('the extension exposes no class missing from the stub', $extra === [], implode(', ', $extra));
$extraF = array_diff($extFunctions, array_keys($stubApi['functions']));
rl_ok('the extension exposes no function missing from the stub', $extraF === [], implode(', ', $extraF));

// 3. Compare. Default values are compared only when both sides expose them
//    (internal functions may not); optional-ness is always compared.
function strip_defaults(array $fn, ?array $other): array
{
    foreach ($fn['params'] as $i => $p) {
        $q = $other['params'][$i] ?? null;
        if (!$p['hasDefault'] || !($q['hasDefault'] ?? false)) {
            unset($fn['params'][$i]['default']);
        }
        unset($fn['params'][$i]['hasDefault']);
    }
    return $fn;
}
function normalize(array $api, array $other): array
{
    foreach ($api['classes'] as $c => $cls) {
        foreach ($cls['methods'] as $m => $fn) {
            $api['classes'][$c]['methods'][$m] = strip_defaults($fn, $other['classes'][$c]['methods'][$m] ?? null);
        }
    }
    foreach ($api['functions'] as $f => $fn) {
        $api['functions'][$f] = strip_defaults($fn, $other['functions'][$f] ?? null);
    }
    return $api;
}
$a = normalize($stubApi, $extApi);
$b = normalize($extApi, $stubApi);

$diffs = [];
function compare(mixed $x, mixed $y, string $path, array &$diffs): void
{
    if (is_array($x) && is_array($y)) {
        foreach (array_unique(array_merge(array_keys($x), array_keys($y))) as $k) {
            if (!array_key_exists($k, $x)) {
                $diffs[] = "$path.$k: missing in stub, extension has " . json_encode($y[$k]);
            } elseif (!array_key_exists($k, $y)) {
                $diffs[] = "$path.$k: missing in extension, stub has " . json_encode($x[$k]);
            } else {
                compare($x[$k], $y[$k], "$path.$k", $diffs);
            }
        }
        return;
    }
    if ($x !== $y) {
        $diffs[] = "$path: stub " . json_encode($x) . ' != extension ' . json_encode($y);
    }
}
compare($a, $b, 'api', $diffs);
rl_ok('stub and extension reflection match', $diffs === [], "\n  " . implode("\n  ", $diffs));
echo "done\n";
?>
--EXPECT--
ok: stub file exists
ok: stub dumps cleanly under php -n
ok: every class in the stub exists in the extension
ok: every function in the stub exists in the extension
ok: stub declares DistributedLock
ok: stub declares RedisLease\LeaseException
ok: stub declares RedisLease\ConnectionException
ok: stub declares RedisLease\LockTimeoutException
ok: stub declares RedisLease\LockLostException
ok: stub declares RedisLease\metrics
ok: the extension exposes no class missing from the stub
ok: the extension exposes no function missing from the stub
ok: stub and extension reflection match
done
