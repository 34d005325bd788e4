<?php
// Where Redis's time per uncontended lock pair goes: raw phpredis's pair (SET NX PX, then a
// compare-and-delete EVALSHA) beside our two functions, and between them stripped-down functions that
// add back one part of ours at a time (the release a function, then the acquire, our keys and
// arguments, the acquire's EXISTS).
// Starts its own Redis, loads the build's library; one phpredis client sends every variant, in turn,
// rounds of `pairs` pairs each, and reads INFO commandstats (FCALL, SET, EVALSHA) around each block: the
// time is Redis's own, not the round trips'. Every reply is checked (each variant takes and frees the
// lock every pair).
// argv: so [rounds] [pairs]. Prints each variant's median µs per pair and its rounds.
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/loop_ops.php';
[$_, $so] = $argv + [null, null];
if ($so === null) {
    fwrite(STDERR, "usage: pair_parts.php SO [ROUNDS] [PAIRS]\n");
    exit(2);
}
[$rounds, $pairs] = [(int) ($argv[2] ?? 14), (int) ($argv[3] ?? 5000)];
$redis = rl_start_redis();
$port = $redis['port'];
$r = new Redis();
$r->connect('127.0.0.1', $port);
$hash = lease_library($r, $so, $port);
if ($hash === null) {
    fwrite(STDERR, "$so loaded no library of its own\n");
    exit(1);
}

// The parts, each a function of its own: p1 takes with SET NX PX alone (one key), p6 the same with our
// keys and arguments declared, px adds our EXISTS; the release is GET, compare, DEL in each.
$r->rawCommand('FUNCTION', 'LOAD', 'REPLACE', <<<'LUA'
#!lua name=pair_parts
local function take(KEYS, ARGV)
  if redis.call('SET', KEYS[1], ARGV[1] .. ':', 'NX', 'PX', ARGV[2]) then
    return 1
  end
  return 0
end
local function take_checked(KEYS, ARGV)
  if redis.call('EXISTS', KEYS[5], KEYS[3], KEYS[6]) == 0 then
    return take(KEYS, ARGV)
  end
  return 0
end
local function free(KEYS, ARGV)
  if redis.call('GET', KEYS[1]) == ARGV[1] .. ':' then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
redis.register_function('pp_take', take)
redis.register_function('pp_take_checked', take_checked)
redis.register_function('pp_free', free)
LUA);
$cas = $r->script('load', BENCH_CAS);
$k = 'lock:{pair_parts}';
$token = bin2hex(random_bytes(16));
$keys = [$k, "$k:fence", "$k:waiters", "$k:terms", "$k:void:$token", "$k:holders"];
$freeKeys = [$k, "$k:fence", "$k:waiters", "$k:terms", "$k:holders", "$k:weights"];
$args = [$token, '30000', '0', 'w'];
// Each variant with the commands whose INFO commandstats time is its own: a function's time includes the
// commands it calls, which Redis also counts under their own names (a SET inside pp_take is in FCALL's
// time and in SET's).
$variants = [
    'raw phpredis: SET NX PX + compare-and-delete EVALSHA' => [['set', 'evalsha'], fn () => [
        $r->set($k, $token, ['nx', 'px' => 30000]) ? 1 : 0, $r->evalSha($cas, [$k, $token], 1)]],
    'SET NX PX + a function: GET, compare, DEL' => [['set', 'fcall'], fn () => [
        $r->set($k, "$token:", ['nx', 'px' => 30000]) ? 1 : 0, $r->rawCommand('FCALL', 'pp_free', 1, $k, $token)]],
    'two functions, one key each' => [['fcall'], fn () => [
        $r->rawCommand('FCALL', 'pp_take', 1, $k, $token, '30000'), $r->rawCommand('FCALL', 'pp_free', 1, $k, $token)]],
    'the same, our keys and arguments declared' => [['fcall'], fn () => [
        $r->rawCommand('FCALL', 'pp_take', 6, ...[...$keys, ...$args]), $r->rawCommand('FCALL', 'pp_free', 6, ...[...$freeKeys, $token])]],
    'and the acquire\'s EXISTS' => [['fcall'], fn () => [
        $r->rawCommand('FCALL', 'pp_take_checked', 6, ...[...$keys, ...$args]), $r->rawCommand('FCALL', 'pp_free', 6, ...[...$freeKeys, $token])]],
    'our two functions' => [['fcall'], fn () => [fcall_acquire($r, $hash, $k, $token, 0), fcall_release($r, $hash, $k, $token)]],
];
$took = [];
for ($round = 0; $round < $rounds; $round++) {
    // The order rotated every round: no variant always follows the same one.
    $names = array_keys($variants);
    $shift = $round % count($names);
    foreach ([...array_slice($names, $shift), ...array_slice($names, 0, $shift)] as $name) {
        [$commands, $pair] = $variants[$name];
        $t = commands_usec($r, $commands);
        for ($i = 0; $i < $pairs; $i++) {
            $reply = $pair();
            if ($reply !== [1, 1]) {
                fwrite(STDERR, "$name: unexpected replies " . json_encode($reply) . "\n");
                exit(1);
            }
        }
        $took[$name][] = (commands_usec($r, $commands) - $t) / $pairs;
    }
}
printf("Redis µs per lock pair (INFO commandstats), %d rounds of %d pairs, medians\n", $rounds, $pairs);
foreach ($took as $name => $x) {
    sort($x);
    printf("  %-55s %6.2f   (%s)\n", $name, median($x), implode(' ', array_map(fn ($v) => sprintf('%.1f', $v), $x)));
}
