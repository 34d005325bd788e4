<?php
/*
 * Small helpers shared by the fault_*.phpt tests: temp directories, pausing
 * and resuming processes with SIGSTOP/SIGCONT (and seeing that it took
 * effect), and reading a php-fpm pool's counters.
 *
 * Needs php-tests/inc/redis.inc (rl_on_cleanup, rl_kill_pid, rl_wait_until).
 */

require_once __DIR__ . '/../php-tests/inc/redis.inc';

/** A fresh temp directory, removed with everything in it at cleanup. */
function fault_tempdir(string $tag = 'fault'): string
{
    for ($i = 0; $i < 10; $i++) {
        $dir = sys_get_temp_dir() . "/rl$tag-" . bin2hex(random_bytes(4));
        if (@mkdir($dir, 0700)) {
            rl_on_cleanup(static fn() => fault_rmtree($dir));
            return $dir;
        }
    }
    throw new RuntimeException('cannot create a temp directory');
}

function fault_rmtree(string $path): void
{
    if (is_dir($path) && !is_link($path)) {
        foreach (scandir($path) ?: [] as $e) {
            if ($e !== '.' && $e !== '..') {
                fault_rmtree("$path/$e");
            }
        }
        @rmdir($path);
    } else {
        @unlink($path);
    }
}

/**
 * Start a private redis-server like rl_start_redis() (same return value, same
 * cleanup, usable with rl_stop_redis()), but without passing on this
 * process's open descriptors.
 *
 * PHP does not mark its sockets close-on-exec, so a redis-server started with
 * proc_open() while FastCGI requests are in flight keeps a copy of their
 * connections open. php-fpm, after answering, waits for the client to close
 * the connection; our close no longer ends it (the copy in redis-server keeps
 * it open), and the worker waits forever. A test that restarts Redis under
 * load therefore starts it through bash, which closes every descriptor above 2
 * before it execs the server.
 */
function fault_start_redis(array $extra = [], int $port = 0): array
{
    $dir = rl_private_dir($extra);
    return fault_start_server(static fn(string $bin, int $p): array => [$bin, '--port', (string) $p,
        '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...$dir, ...$extra], $port);
}

/**
 * Start a Sentinel watching $service (master at 127.0.0.1:$masterPort, quorum 2,
 * down after 1 s), like fault_start_redis(), with its own config file.
 */
function fault_start_sentinel(string $service, int $masterPort): array
{
    $dir = fault_tempdir('sentinel');
    return fault_start_server(static function (string $bin, int $p) use ($dir, $service, $masterPort): array {
        file_put_contents("$dir/sentinel-$p.conf", "port $p\nbind 127.0.0.1\ndir $dir\n"
            . "sentinel monitor $service 127.0.0.1 $masterPort 2\n"
            . "sentinel down-after-milliseconds $service 1000\n"
            . "sentinel failover-timeout $service 3000\n"
            . "sentinel parallel-syncs $service 1\n");
        return [$bin, "$dir/sentinel-$p.conf", '--sentinel'];
    });
}

/**
 * Start a redis-server with the argv $argvFor(binary, port) gives, on $port or a
 * free one; see fault_start_redis().
 */
function fault_start_server(callable $argvFor, int $port = 0): array
{
    $bin = trim((string) shell_exec('command -v redis-server 2>/dev/null'));
    $bash = trim((string) shell_exec('command -v bash 2>/dev/null'));
    if ($bin === '' || $bash === '') {
        throw new RuntimeException('redis-server or bash not found in PATH');
    }
    $setpriv = trim((string) shell_exec('command -v setpriv 2>/dev/null'));
    // Close fds > 2 (bash handles multi-digit fds in redirections), then exec.
    $closer = 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; '
        . 'if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done; exec "$@"';
    for ($attempt = 0; $attempt < 5; $attempt++) {
        $p = $port !== 0 ? $port : rl_free_port();
        $log = rl_tempfile('.log');
        $argv = $argvFor($bin, $p);
        if ($setpriv !== '') {
            // The kernel kills the server if this PHP process dies uncleanly.
            $argv = [$setpriv, '--pdeathsig', 'KILL', '--', ...$argv];
        }
        $proc = proc_open([$bash, '-c', $closer, 'bash', ...$argv], [
            0 => ['file', '/dev/null', 'r'],
            1 => ['file', $log, 'a'],
            2 => ['file', $log, 'a'],
        ], $pipes);
        if (!is_resource($proc)) {
            throw new RuntimeException('proc_open(redis-server) failed');
        }
        // bash execs setpriv, which execs redis-server: one pid throughout.
        $pid = proc_get_status($proc)['pid'];
        $stop = static function () use ($proc, $pid): void {
            if (is_resource($proc) && proc_get_status($proc)['running']) {
                rl_kill_pid($pid, 'KILL');
            }
            if (is_resource($proc)) {
                proc_close($proc);
            }
        };
        rl_on_cleanup($stop);
        // Ready when it answers PING (after loading its data), or given up when it exits.
        rl_wait_until(static fn() => !proc_get_status($proc)['running'] || rl_ping($p), 10.0, 0.01);
        // The server that answers must be ours (not another one that took the port).
        if (proc_get_status($proc)['running'] && rl_ping($p) && rl_redis_pid($p) === $pid) {
            return ['port' => $p, 'dsn' => "redis://127.0.0.1:$p", 'pid' => $pid,
                'log' => $log, 'proc' => $proc, 'unixsocket' => null, 'stop' => $stop];
        }
        $stop();
        if ($port !== 0 && $attempt >= 2) {
            break;
        }
    }
    throw new RuntimeException('could not start redis-server; last log: ' . (isset($log) ? @file_get_contents($log) : ''));
}

/**
 * Wait (bounded) until the Redis on $port has finished with every connection
 * its clients have closed: no socket on its side is left in CLOSE_WAIT.
 *
 * After SIGCONT, Redis still has to run what clients sent it while it was
 * stopped and then gave up on (they closed those connections). It reads such
 * a connection's commands before its end, runs them, and only then closes
 * its side; so once no CLOSE_WAIT socket is left, every late command has run.
 */
function fault_await_late_commands(int $port, float $timeout = 3.0): bool
{
    $hexPort = sprintf('%04X', $port);
    return rl_wait_until(static function () use ($hexPort): bool {
        foreach (@file('/proc/net/tcp', FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            // "sl local_address rem_address st ...": address as HEXIP:HEXPORT, state 08 is CLOSE_WAIT.
            $f = preg_split('/\s+/', trim($line));
            if (($f[3] ?? '') === '08' && str_ends_with($f[1] ?? '', ':' . $hexPort)) {
                return false;
            }
        }
        return true;
    }, $timeout, 0.005);
}

/** The state letter of process $pid from /proc (R, S, T, Z...), or null when it is gone. */
function fault_proc_state(int $pid): ?string
{
    $stat = @file_get_contents("/proc/$pid/stat");
    if ($stat === false) {
        return null;
    }
    // "pid (comm) state ...": comm may contain spaces and ')'.
    return substr($stat, strrpos($stat, ')') + 2, 1);
}

/**
 * SIGSTOP $pid and wait (bounded) until the kernel reports it stopped. A
 * cleanup task resumes it, so a failing test never leaves a stopped process
 * behind (a stopped php-fpm worker would also delay the pool's shutdown).
 */
function fault_pause(int $pid): bool
{
    static $registered = [];
    if (!isset($registered[$pid])) {
        $registered[$pid] = true;
        rl_on_cleanup(static fn() => rl_kill_pid($pid, 'CONT'));
    }
    rl_kill_pid($pid, 'STOP');
    return rl_wait_until(static fn() => in_array(fault_proc_state($pid), ['T', 't', null], true), 3.0, 0.002)
        && fault_proc_state($pid) !== null;
}

/** SIGCONT $pid and wait (bounded) until it is no longer reported stopped. */
function fault_resume(int $pid): bool
{
    rl_kill_pid($pid, 'CONT');
    return rl_wait_until(static fn() => !in_array(fault_proc_state($pid), ['T', 't'], true), 3.0, 0.002);
}

/**
 * The redis_lease counters of every worker of $pool (RedisLease\metrics(server:
 * true)), read through php-tests/fpm-app/fault_metrics.php; null on failure.
 */
function fault_pool_counters(FpmPool $pool): ?array
{
    $r = $pool->client()->request(FcgiClient::params(realpath(__DIR__ . '/../php-tests/fpm-app/fault_metrics.php')), '', 10.0);
    $j = $r->ok() ? $r->json() : null;
    return is_array($j) ? $j['server'] : null;
}

/** Exception class and message of $fn(), or its return value when it throws nothing. */
function fault_outcome(callable $fn): array
{
    try {
        return ['value' => $fn(), 'exception' => null, 'message' => null];
    } catch (Throwable $e) {
        return ['value' => null, 'exception' => get_class($e), 'message' => $e->getMessage()];
    }
}

/**
 * A CLI child using session form $form ('class' or 'native', see
 * php-tests/fpm-app/harness.inc) on $dsn with session $options; it runs the
 * steps of testing/fault_session_child.php. Needs harness.inc loaded.
 */
final class FaultSessionChild
{
    public readonly RlChild $child;

    public function __construct(public readonly string $form, string $dsn, array $options, array $ini = [])
    {
        $this->child = st_child($form, $dsn, $options,
            'require ' . var_export(__DIR__ . '/fault_session_child.php', true) . ';', $ini);
    }

    /** Run one step; its JSON answer, or ['error' => ...] when none came within $timeout. */
    public function step(string $op, array $args = [], float $timeout = 10.0): array
    {
        $this->child->send(json_encode(['op' => $op] + $args));
        $line = $this->child->readLine($timeout);
        $j = $line === null ? null : json_decode($line, true);
        return is_array($j) ? $j : ['error' => 'no answer: ' . var_export($line, true), 'warnings' => []];
    }

    /** Ask it to exit; its exit code (bounded wait). */
    public function finish(): int
    {
        $this->child->send(json_encode(['op' => 'exit']));
        return $this->child->wait(5.0);
    }
}
