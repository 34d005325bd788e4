<?php
/*
 * Dump the shape of the redis_lease API as JSON, for stub_matches_reflection.phpt.
 *
 *   php -n dump_api.php stub <stub file>   require the stub (no extension loaded)
 *                                          and dump what it declares
 *   (or include this file and call rl_dump_api($classes, $functions))
 */

function rl_type_str(?ReflectionType $t): ?string
{
    return $t === null ? null : (string) $t;
}

function rl_dump_function(ReflectionFunctionAbstract $f): array
{
    $params = [];
    foreach ($f->getParameters() as $p) {
        $d = [
            'name' => $p->getName(),
            'type' => rl_type_str($p->getType()),
            'optional' => $p->isOptional(),
            'variadic' => $p->isVariadic(),
            'byRef' => $p->isPassedByReference(),
            'hasDefault' => $p->isDefaultValueAvailable(),
        ];
        if ($p->isDefaultValueAvailable()) {
            try {
                $d['default'] = var_export($p->getDefaultValue(), true);
            } catch (Throwable $e) {
                $d['default'] = '<unavailable: ' . $e->getMessage() . '>';
            }
        }
        $params[] = $d;
    }
    $out = [
        'name' => $f->getName(),
        'return' => rl_type_str($f->getReturnType() ?? ($f->hasTentativeReturnType() ? $f->getTentativeReturnType() : null)),
        'params' => $params,
    ];
    if ($f instanceof ReflectionMethod) {
        $out['static'] = $f->isStatic();
    }
    return $out;
}

function rl_dump_class(string $name): array
{
    $rc = new ReflectionClass($name);
    $methods = [];
    foreach ($rc->getMethods(ReflectionMethod::IS_PUBLIC) as $m) {
        // Only methods declared by this class itself (not inherited ones).
        if ($m->getDeclaringClass()->getName() !== $rc->getName()) {
            continue;
        }
        $methods[$m->getName()] = rl_dump_function($m);
    }
    ksort($methods);
    $ifaces = $rc->getInterfaceNames();
    sort($ifaces);
    $consts = [];
    foreach ($rc->getReflectionConstants() as $c) {
        if ($c->getDeclaringClass()->getName() === $rc->getName()) {
            $consts[$c->getName()] = var_export($c->getValue(), true);
        }
    }
    ksort($consts);
    return [
        'name' => $rc->getName(),
        'final' => $rc->isFinal(),
        'abstract' => $rc->isAbstract(),
        'interface' => $rc->isInterface(),
        'parent' => $rc->getParentClass() ? $rc->getParentClass()->getName() : null,
        'interfaces' => $ifaces,
        'constants' => $consts,
        'methods' => $methods,
    ];
}

function rl_dump_api(array $classes, array $functions): array
{
    $out = ['classes' => [], 'functions' => []];
    sort($classes);
    sort($functions);
    foreach ($classes as $c) {
        $out['classes'][$c] = rl_dump_class($c);
    }
    foreach ($functions as $f) {
        $out['functions'][$f] = rl_dump_function(new ReflectionFunction($f));
    }
    return $out;
}

if (PHP_SAPI === 'cli' && isset($argv[1]) && realpath($argv[0]) === __FILE__ && $argv[1] === 'stub') {
    // Everything the stub declares: diff the declared classes/functions
    // before and after requiring it.
    $beforeC = array_merge(get_declared_classes(), get_declared_interfaces());
    $beforeF = get_defined_functions()['user'];
    require $argv[2];
    $classes = array_values(array_diff(array_merge(get_declared_classes(), get_declared_interfaces()), $beforeC));
    $functions = array_values(array_diff(get_defined_functions()['user'], $beforeF));
    // ReflectionFunction names are as declared; get_defined_functions() lowercases.
    $functions = array_map(fn($f) => (new ReflectionFunction($f))->getName(), $functions);
    echo json_encode(rl_dump_api($classes, $functions), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), "\n";
}
