<?php
/*
 * A private php-fpm for tests and demos.
 *
 *   require 'testing/fpm_pool.php';          // also brings FcgiClient and the redis helpers
 *   $redis = rl_start_redis();                // php-tests/inc/redis.inc: private redis-server
 *   $pool = FpmPool::start([
 *       'ini'   => ['session.save_handler' => 'redis_lease', 'session.save_path' => $redis['dsn']],
 *       'admin' => ['redis_lease.session.lock_ttl' => '2'],   // php_admin_value[...]
 *       'max_children' => 8,
 *   ]);
 *   $r = $pool->client()->request(FcgiClient::params('/abs/path/app.php', ['a' => 1]));
 *   $pool->workerPids();                      // pids of the pool's workers
 *   $pool->stop();                            // also done at shutdown
 *
 * php-fpm runs in the foreground (-F), without the system's php.ini (-n; the
 * pool's own php.ini is given with -c and loads the extension), as root if we
 * are root (-R), with a static pool. Its master leads a new session (setsid),
 * so master and workers form one process group; stop() ends that group, and a
 * small watchdog process ends it too if the process that started it dies
 * without cleaning up (killed by run-tests, a segfault...). Without the
 * watchdog, fpm workers outlive a killed master and keep serving the socket.
 *
 * Everything lives in one temp directory (configs, socket, logs), removed by stop().
 */

require_once __DIR__ . '/fcgi_client.php';
require_once __DIR__ . '/process.php';
// rl_start_redis(), RlRaw, rl_wait_until(), rl_kill_pid(): no run-tests dependency.
require_once __DIR__ . '/../php-tests/inc/redis.inc';

final class FpmPool
{
    public const PING_PATH = '/fpm-ping';
    public const STATUS_PATH = '/fpm-status';

    /** FastCGI address: 'unix:///…/fpm.sock' or 'tcp://127.0.0.1:PORT'. */
    public readonly string $address;
    /** Temp directory with php.ini, fpm.conf, the socket and the logs. */
    public readonly string $dir;
    /** The php-fpm master's pid (leader of the pool's process group). */
    public readonly int $masterPid;
    public readonly int $maxChildren;
    /** The extension loaded by the pool's php.ini. */
    public readonly string $so;
    /** fpm's own log: master notices and, with catch_workers_output, workers' stderr. */
    public readonly string $fpmLog;
    /** PHP's error_log of the workers. */
    public readonly string $phpErrorLog;

    /** @var resource|null */
    private $proc;
    /** @var resource|null */
    private $watchdog = null;
    private int $watchdogPid = 0;
    private bool $stopped = false;
    private int $ownerPid;
    private ?FcgiClient $client = null;
    /** Worker pids ever seen, so stop() can make sure none survives. */
    private array $seenWorkers = [];

    /**
     * Options:
     *  'so'            path of the extension (default: see extensionPath())
     *  'ini'           php.ini settings, name => value (the extension line is added first)
     *  'admin'         php_admin_value[name] = value in the pool
     *  'values'        php_value[name] = value in the pool
     *  'env'           env[NAME] = value in the pool (clear_env stays on)
     *  'extensions'    other extensions to load first, e.g. ['igbinary', 'redis']
     *  'without_redis_lease' true: do not load redis_lease (a baseline pool)
     *  'max_children'  static pool size, default 8
     *  'listen'        'unix' (default) or 'tcp' (a free 127.0.0.1 port)
     *  'request_terminate_timeout' seconds, default 60 (a safety net, not a test tool)
     *  'start_timeout' seconds to wait for the pool to answer, default 10
     *  'fpm_bin'       default /usr/sbin/php-fpm8.2
     */
    public static function start(array $options = []): FpmPool
    {
        // A free tcp port found by probing can be taken by someone else before
        // php-fpm binds it: try a few ports before giving up.
        $attempts = ($options['listen'] ?? 'unix') === 'tcp' ? 3 : 1;
        for ($i = 1; ; $i++) {
            try {
                return new FpmPool($options);
            } catch (RuntimeException $e) {
                if ($i >= $attempts) {
                    throw $e;
                }
            }
        }
    }

    private function __construct(array $o)
    {
        $this->ownerPid = getmypid();
        $this->so = self::extensionPath($o['so'] ?? null);
        $this->maxChildren = (int) ($o['max_children'] ?? 8);
        if ($this->maxChildren < 1) {
            throw new ValueError('max_children must be >= 1');
        }
        // Debian/Ubuntu name the binary after the PHP version; PHP_FPM_BIN overrides it.
        $bin = $o['fpm_bin'] ?? (getenv('PHP_FPM_BIN') ?: '/usr/sbin/php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION);
        if (!is_executable($bin)) {
            throw new RuntimeException("php-fpm not found at $bin");
        }

        $this->dir = rl_temp_dir('rlfpm');
        $this->fpmLog = $this->dir . '/fpm.log';
        $this->phpErrorLog = $this->dir . '/php-errors.log';
        touch($this->fpmLog);
        touch($this->phpErrorLog);

        if (($o['listen'] ?? 'unix') === 'tcp') {
            $port = rl_free_port();
            $this->address = "tcp://127.0.0.1:$port";
            $listen = "127.0.0.1:$port";
        } else {
            $sock = $this->dir . '/fpm.sock';
            $this->address = "unix://$sock";
            $listen = $sock;
        }

        // php.ini of the workers: our extension, quiet and logged errors, then the caller's settings.
        $ini = [
            'error_reporting' => '-1',
            'display_errors' => '0',
            'display_startup_errors' => '1',
            'log_errors' => '1',
            'error_log' => $this->phpErrorLog,
            'max_execution_time' => '30',
        ];
        foreach ($o['ini'] ?? [] as $k => $v) {
            $ini[$k] = $v;
        }
        // Other extensions first (e.g. igbinary before redis), then ours unless left out.
        $iniText = '';
        foreach ($o['extensions'] ?? [] as $ext) {
            $iniText .= 'extension=' . self::quote($ext) . "\n";
        }
        if (empty($o['without_redis_lease'])) {
            $iniText .= 'extension=' . self::quote($this->so) . "\n";
        }
        foreach ($ini as $k => $v) {
            $iniText .= $k . '=' . self::quote((string) $v) . "\n";
        }
        file_put_contents($this->dir . '/php.ini', $iniText);

        $conf = "[global]\n"
            . 'pid = ' . self::quote($this->dir . '/fpm.pid') . "\n"
            . 'error_log = ' . self::quote($this->fpmLog) . "\n"
            . "log_level = notice\n"
            . "daemonize = no\n"
            . "process_control_timeout = 5\n"
            . "\n[rltest]\n"
            . 'listen = ' . self::quote($listen) . "\n"
            . "listen.backlog = 1024\n"
            . "pm = static\n"
            . "pm.max_children = {$this->maxChildren}\n"
            . "catch_workers_output = yes\n"
            . "decorate_workers_output = no\n"
            . 'ping.path = ' . self::PING_PATH . "\n"
            . "ping.response = pong\n"
            . 'pm.status_path = ' . self::STATUS_PATH . "\n"
            . 'request_terminate_timeout = ' . (int) ($o['request_terminate_timeout'] ?? 60) . "s\n";
        foreach ($o['admin'] ?? [] as $k => $v) {
            $conf .= "php_admin_value[$k] = " . self::quote((string) $v) . "\n";
        }
        foreach ($o['values'] ?? [] as $k => $v) {
            $conf .= "php_value[$k] = " . self::quote((string) $v) . "\n";
        }
        foreach ($o['env'] ?? [] as $k => $v) {
            $conf .= "env[$k] = " . self::quote((string) $v) . "\n";
        }
        file_put_contents($this->dir . '/fpm.conf', $conf);

        // setsid: the master leads a new session and process group (it is not a
        // group leader when proc_open starts it, so setsid execs without forking).
        $cmd = [trim((string) shell_exec('command -v setsid')) ?: '/usr/bin/setsid',
            $bin, '-F', '-n', '-y', $this->dir . '/fpm.conf', '-c', $this->dir . '/php.ini'];
        if (function_exists('posix_geteuid') ? posix_geteuid() === 0 : trim((string) shell_exec('id -u')) === '0') {
            $cmd[] = '-R';
        }
        $this->proc = proc_open($cmd, [
            0 => ['file', '/dev/null', 'r'],
            1 => ['file', $this->dir . '/fpm.out', 'a'],
            2 => ['file', $this->dir . '/fpm.out', 'a'],
        ], $pipes);
        if (!is_resource($this->proc)) {
            $this->removeDir();
            throw new RuntimeException('proc_open(php-fpm) failed');
        }
        $this->masterPid = proc_get_status($this->proc)['pid'];
        $this->startWatchdog();
        register_shutdown_function(function (): void {
            if (getmypid() === $this->ownerPid) {
                $this->stop();
            }
        });

        try {
            $this->awaitReady((float) ($o['start_timeout'] ?? 10.0));
        } catch (Throwable $e) {
            $log = $this->logs();
            $this->stop();
            throw new RuntimeException($e->getMessage() . "\n--- fpm logs ---\n" . $log, 0, $e);
        }
    }

    /**
     * The extension to load: $so if given, else env REDIS_LEASE_SO, else the
     * "-d extension=…" that run-tests puts in TEST_PHP_EXTRA_ARGS, else the
     * redis_lease library this very process has loaded (/proc/self/maps), else
     * the repo's release build.
     */
    public static function extensionPath(?string $so = null): string
    {
        // An explicitly named library must exist; the guesses after it may not.
        $env = getenv('REDIS_LEASE_SO');
        foreach ([$so, $env === false ? null : $env] as $explicit) {
            if ($explicit !== null && $explicit !== '') {
                if (!is_file($explicit)) {
                    throw new RuntimeException("extension not found: $explicit");
                }
                return realpath($explicit);
            }
        }
        $candidates = [];
        $extra = (string) getenv('TEST_PHP_EXTRA_ARGS');
        if (preg_match('/(?:^|\s)-d\s*["\']?extension=["\']?([^\s"\']*redis_lease[^\s"\']*)/', $extra, $m)) {
            $candidates[] = $m[1];
        }
        $maps = @file_get_contents('/proc/self/maps');
        if ($maps !== false && preg_match('~\s(/\S*redis_lease\S*\.so)\s*$~m', $maps, $m)) {
            $candidates[] = $m[1];
        }
        $candidates[] = __DIR__ . '/../target/release/libredis_lease.so';
        foreach ($candidates as $c) {
            if (is_file($c)) {
                return realpath($c);
            }
        }
        throw new RuntimeException('redis_lease extension not found (tried: ' . implode(', ', $candidates) . ')');
    }

    /** An INI value in double quotes; values that cannot be quoted are refused. */
    private static function quote(string $v): string
    {
        if (strpbrk($v, "\"\n\r\\") !== false || str_contains($v, '${')) {
            throw new ValueError('INI value not supported by FpmPool: ' . var_export($v, true));
        }
        return '"' . $v . '"';
    }

    /** Ends the pool's process group if the process that started it dies first (see rl_group_watchdog). */
    private function startWatchdog(): void
    {
        [$this->watchdog, $this->watchdogPid] = rl_group_watchdog($this->ownerPid, $this->masterPid, $this->dir);
    }

    private function awaitReady(float $timeout): void
    {
        $deadline = microtime(true) + $timeout;
        $lastError = 'no answer';
        while (microtime(true) < $deadline) {
            if (!$this->masterRunning()) {
                throw new RuntimeException('php-fpm exited during startup');
            }
            $sockFile = str_starts_with($this->address, 'unix://') ? substr($this->address, 7) : null;
            if ($sockFile === null || file_exists($sockFile)) {
                $r = $this->ping(min(1.0, max(0.05, $deadline - microtime(true))));
                if ($r->ok() && trim($r->body) === 'pong') {
                    // A static pool forks all its workers at start; wait for every one.
                    $ok = rl_wait_until(fn() => count($this->workerPids()) === $this->maxChildren,
                        max(0.0, $deadline - microtime(true)));
                    if ($ok) {
                        return;
                    }
                    $lastError = 'only ' . count($this->workerPids()) . " of {$this->maxChildren} workers";
                    break;
                }
                $lastError = $r->describe();
            }
            usleep(20000);
        }
        throw new RuntimeException(sprintf('php-fpm did not answer within %.1f s (%s)', $timeout, $lastError));
    }

    public function client(): FcgiClient
    {
        return $this->client ??= new FcgiClient($this->address);
    }

    /** fpm's ping page ("pong"). */
    public function ping(float $timeout = 2.0): FcgiResponse
    {
        return $this->client()->request(self::internalParams(self::PING_PATH, ''), '', $timeout);
    }

    /** fpm's full status page, decoded (null when it did not answer). */
    public function status(float $timeout = 2.0): ?array
    {
        $r = $this->client()->request(self::internalParams(self::STATUS_PATH, 'json&full'), '', $timeout);
        return $r->ok() ? $r->json() : null;
    }

    private static function internalParams(string $path, string $query): array
    {
        return [
            'GATEWAY_INTERFACE' => 'CGI/1.1',
            'REQUEST_METHOD' => 'GET',
            'SCRIPT_FILENAME' => $path,
            'SCRIPT_NAME' => $path,
            'REQUEST_URI' => $path . ($query !== '' ? "?$query" : ''),
            'QUERY_STRING' => $query,
            'SERVER_PROTOCOL' => 'HTTP/1.1',
        ];
    }

    public function masterRunning(): bool
    {
        return is_resource($this->proc) && proc_get_status($this->proc)['running'];
    }

    /**
     * Live workers (children of the master that are not zombies), sorted. Read
     * from /proc, so it also works while every worker is busy.
     *
     * @return int[]
     */
    public function workerPids(): array
    {
        $pids = rl_child_pids($this->masterPid);
        foreach ($pids as $p) {
            $this->seenWorkers[$p] = true;
        }
        return $pids;
    }

    /** Whether the pool still has all its workers (none died). */
    public function intact(): bool
    {
        return count($this->workerPids()) === $this->maxChildren;
    }

    /** Wait (bounded) until the pool has all its workers again, e.g. after one was killed. */
    public function awaitWorkers(float $timeout = 5.0): bool
    {
        return rl_wait_until(fn() => count($this->workerPids()) === $this->maxChildren, $timeout, 0.02);
    }

    /** fpm's log and PHP's error log, for failure messages. */
    public function logs(): string
    {
        return rl_read_logs($this->dir, ['fpm.out', 'fpm.log', 'php-errors.log']);
    }

    /** PHP's error log of the workers (warnings that no error handler caught). */
    public function phpErrors(): string
    {
        return (string) @file_get_contents($this->phpErrorLog);
    }

    /** Stop php-fpm (master and workers) and remove the temp directory. Idempotent. */
    public function stop(): void
    {
        if ($this->stopped) {
            return;
        }
        $this->stopped = true;
        $this->workerPids(); // remember the current workers
        if ($this->masterRunning()) {
            // SIGTERM: immediate termination of master and workers.
            rl_kill_pid($this->masterPid, 'TERM');
            if (!rl_wait_until(fn() => !$this->masterRunning(), 5.0, 0.01)) {
                rl_kill_pid($this->masterPid, 'KILL');
                rl_wait_until(fn() => !$this->masterRunning(), 2.0, 0.01);
            }
        }
        // Whatever is left of the group (workers of a killed master), and any
        // worker seen earlier that is still around.
        exec('kill -KILL -' . (int) $this->masterPid . ' 2>/dev/null');
        foreach (array_keys($this->seenWorkers) as $pid) {
            if (is_dir("/proc/$pid") && str_contains((string) @file_get_contents("/proc/$pid/cmdline"), 'php-fpm')) {
                rl_kill_pid($pid, 'KILL');
            }
        }
        if (is_resource($this->proc)) {
            proc_close($this->proc);
        }
        $this->proc = null;
        if (is_resource($this->watchdog)) {
            rl_kill_pid($this->watchdogPid, 'KILL');
            proc_close($this->watchdog);
        }
        $this->watchdog = null;
        $this->removeDir();
    }

    private function removeDir(): void
    {
        rl_remove_tree($this->dir);
    }

    public function __destruct()
    {
        if (getmypid() === $this->ownerPid) {
            $this->stop();
        }
    }
}
