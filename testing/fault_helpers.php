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
 * before it execs the server. $eachTry gives arguments drawn again on each try
 * to start it (a port besides its own).
 */
function fault_start_redis(array $extra = [], int $port = 0, ?Closure $eachTry = null): array
{
    $dir = rl_private_dir($extra);
    return fault_start_server(static fn(string $bin, int $p): array => [$bin, '--port', (string) $p,
        '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...$dir, ...$extra,
        ...($eachTry ? $eachTry() : [])], $port);
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

/**
 * A Redis Cluster of $masters masters with $replicas replicas each, made with
 * `redis-cli --cluster create`: the nodes (fault_start_redis() arrays, in the
 * order given to redis-cli: masters first) once every node says cluster_state:ok.
 * Bus ports are chosen freely (a node's default, its port + 10000, may be out of
 * range).
 */
function fault_start_cluster(int $masters, int $replicas): array
{
    $nodes = [];
    for ($i = 0; $i < $masters * (1 + $replicas); $i++) {
        $nodes[] = fault_start_cluster_node(fault_tempdir('node'));
    }
    $cmd = 'redis-cli --cluster create ' . implode(' ', array_map(fn($n) => "127.0.0.1:{$n['port']}", $nodes))
        . " --cluster-replicas $replicas --cluster-yes 2>&1";
    exec($cmd, $out, $status);
    if ($status !== 0) {
        throw new RuntimeException("redis-cli --cluster create failed:\n" . implode("\n", $out));
    }
    if (!fault_cluster_await_ok($nodes, 30.0)) {
        throw new RuntimeException('the cluster did not become ok');
    }
    // Every master's replicas acknowledging writes (what WAIT counts): a replica
    // reported online may not acknowledge yet for a moment after its first sync.
    if ($replicas > 0 && !fault_cluster_await_acks($nodes, $replicas, 30.0)) {
        throw new RuntimeException('the replicas did not acknowledge writes');
    }
    return $nodes;
}

/**
 * A cluster node keeping its state (nodes.conf) in $dir, on $port (0: a free one):
 * started again with the same $dir and port, a node rejoins its cluster. Its
 * array has 'dir' too.
 */
function fault_start_cluster_node(string $dir, int $port = 0): array
{
    // The bus port is drawn again on each try: another server may take it first, and ours then exits.
    return fault_start_redis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
        '--cluster-node-timeout', '2000', '--repl-diskless-sync-delay', '0', '--dir', $dir], $port,
        static fn(): array => ['--cluster-port', (string) rl_free_port()]) + ['dir' => $dir];
}

/** Whether each master's $replicas replicas acknowledge a write on it (bounded wait). */
function fault_cluster_await_acks(array $nodes, int $replicas, float $timeout): bool
{
    $slots = (new RlRaw($nodes[0]['port']))->cmd('CLUSTER', 'SLOTS');
    foreach ($slots as $range) {
        // A key of this master's: its slot in the range.
        $raw = new RlRaw((int) $range[2][1]);
        for ($i = 0; ; $i++) {
            $slot = $raw->cmd('CLUSTER', 'KEYSLOT', "probe$i");
            if ($range[0] <= $slot && $slot <= $range[1]) {
                break;
            }
        }
        $ok = rl_wait_until(static function () use ($raw, $i, $replicas): bool {
            $raw->cmd('SET', "probe$i", '1', 'PX', '10000');
            return $raw->cmd('WAIT', $replicas, 200) >= $replicas;
        }, $timeout, 0.01);
        if (!$ok) {
            return false;
        }
    }
    return true;
}

/** Whether every node of $nodes that still runs says cluster_state:ok (bounded wait). */
function fault_cluster_await_ok(array $nodes, float $timeout): bool
{
    return rl_wait_until(static function () use ($nodes): bool {
        foreach ($nodes as $n) {
            if (!proc_get_status($n['proc'])['running']) {
                continue;
            }
            try {
                if (!str_contains((string) (new RlRaw($n['port'], 1.0))->cmd('CLUSTER', 'INFO'), 'cluster_state:ok')) {
                    return false;
                }
            } catch (Throwable) {
                return false;
            }
        }
        return true;
    }, $timeout, 0.05);
}

/** A cluster DSN over the first three nodes. */
function fault_cluster_seeds(array $nodes): array
{
    return array_map(fn($n) => "127.0.0.1:{$n['port']}", array_slice($nodes, 0, 3));
}

/** The slot of $key, and the port of the master serving it, per the node on $port. */
function fault_cluster_owner(int $port, string $key): array
{
    $raw = new RlRaw($port);
    $slot = $raw->cmd('CLUSTER', 'KEYSLOT', $key);
    foreach ($raw->cmd('CLUSTER', 'SLOTS') as $range) {
        if ($range[0] <= $slot && $slot <= $range[1]) {
            return [$slot, (int) $range[2][1]];
        }
    }
    throw new RuntimeException("no master serves slot $slot");
}

/**
 * Move $slot, with its keys, to the master on $toPort, the way redis-cli
 * --cluster reshard does (IMPORTING, MIGRATING, MIGRATE key by key, NODE).
 * $between(): called after each batch of keys (keeps a load going).
 */
function fault_cluster_move_slot(array $nodes, int $slot, int $toPort, ?callable $between = null): void
{
    $live = array_values(array_filter($nodes, fn($n) => proc_get_status($n['proc'])['running']));
    $fromPort = null;
    foreach ((new RlRaw($live[0]['port']))->cmd('CLUSTER', 'SLOTS') as $range) {
        if ($range[0] <= $slot && $slot <= $range[1]) {
            $fromPort = (int) $range[2][1];
        }
    }
    if ($fromPort === null || $fromPort === $toPort) {
        throw new RuntimeException("slot $slot is not served by another master than $toPort");
    }
    $from = new RlRaw($fromPort);
    $to = new RlRaw($toPort);
    $fromId = $from->cmd('CLUSTER', 'MYID');
    $toId = $to->cmd('CLUSTER', 'MYID');
    $to->cmd('CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $fromId);
    $from->cmd('CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $toId);
    while (($keys = $from->cmd('CLUSTER', 'GETKEYSINSLOT', $slot, 10)) !== []) {
        $from->cmd('MIGRATE', '127.0.0.1', $toPort, '', 0, 5000, 'REPLACE', 'KEYS', ...$keys);
        if ($between !== null) {
            $between();
        }
    }
    foreach ($live as $n) {
        try {
            (new RlRaw($n['port']))->cmd('CLUSTER', 'SETSLOT', $slot, 'NODE', $toId);
        } catch (Throwable) {
            // A replica answers that it is not a master: it learns from its master.
        }
    }
}
