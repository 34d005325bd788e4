<?php
/*
 * A private Apache 2.4 with mpm_event and mod_php: PHP in threads, the way a
 * threaded server (FrankenPHP, Apache's event and worker MPMs) runs it. Needs a
 * ZTS PHP's Apache module (RL_APACHE_LIBPHP: the ZTS cell of scripts/cells.sh
 * builds one) and Debian's apache2.
 *
 *   require 'testing/apache_pool.php';
 *   if ($why = ApachePool::unavailable()) { die("skip $why"); }
 *   $pool = ApachePool::start(['ini' => [...], 'admin' => [...]]);  // as FpmPool::start
 *   $r = $pool->client()->request(FcgiClient::params('/abs/path/app.php', ['a' => 1], ['RL_DSN' => $dsn]));
 *   $rs = $pool->client()->multi($requests, 30.0);
 *   $pool->childPids();                      // Apache's child processes (each runs 25 PHP threads)
 *   $pool->stop();                           // also done at shutdown
 *
 * Requests are given as FastCGI params, as to FpmPool, so that the same
 * checkers judge both servers: its client is an FcgiClient in HTTP mode.
 *
 * Apache runs in the foreground (-DFOREGROUND), from a config of its own in a
 * temp directory, its parent leading a new process group; stop() ends the group,
 * and a watchdog process ends it if the process that started it dies first.
 */

require_once __DIR__ . '/fpm_pool.php'; // FcgiClient, FcgiResponse, FpmPool::extensionPath, redis.inc, process.php

final class ApachePool
{
    public const PROCESSES = 2;
    public const THREADS = 25;

    public readonly string $dir;
    public readonly int $port;
    public readonly int $parentPid;
    public readonly string $so;
    /** Apache's error log (mod_php's startup messages, crashed children). */
    public readonly string $errorLog;
    /** PHP's error_log of the threads. */
    public readonly string $phpErrorLog;

    /** @var resource|null */
    private $proc;
    /** @var resource|null */
    private $watchdog = null;
    private bool $stopped = false;
    private int $ownerPid;
    private ?FcgiClient $client = null;
    /** The children once all were up. */
    private array $children = [];

    /** Why no threaded server can run here, or null when one can. */
    public static function unavailable(): ?string
    {
        if (!PHP_ZTS) {
            return 'needs a ZTS PHP (the php8.2-zts cell of scripts/cells.sh)';
        }
        $lib = (string) getenv('RL_APACHE_LIBPHP');
        if ($lib === '' || !is_file($lib)) {
            return 'RL_APACHE_LIBPHP names no mod_php of this PHP (the php8.2-zts cell sets it)';
        }
        if (self::binary() === null) {
            return 'needs Apache 2.4 (apache2)';
        }
        return null;
    }

    private static function binary(): ?string
    {
        foreach (['/usr/sbin/apache2', '/usr/sbin/httpd'] as $b) {
            if (is_executable($b)) {
                return $b;
            }
        }
        return null;
    }

    /**
     * Options: 'so' (the extension), 'ini' (php.ini settings), 'admin' and
     * 'values' (php_admin_value / php_value), 'env' (Apache's environment, added
     * to PATH and LANG), 'start_timeout' (seconds).
     */
    public static function start(array $options = []): ApachePool
    {
        for ($i = 1; ; $i++) {
            try {
                return new ApachePool($options);
            } catch (RuntimeException $e) {
                // A probed free port taken by someone else meanwhile.
                if ($i >= 3) {
                    throw $e;
                }
            }
        }
    }

    private function __construct(array $o)
    {
        if (($why = self::unavailable()) !== null) {
            throw new RuntimeException("ApachePool: $why");
        }
        $this->ownerPid = getmypid();
        $this->so = FpmPool::extensionPath($o['so'] ?? null);
        $this->dir = rl_temp_dir('rlapache');
        // The threads run as www-data: they write their logs and the tests' files here.
        chmod($this->dir, 0777);
        $this->errorLog = $this->dir . '/error.log';
        $this->phpErrorLog = $this->dir . '/php-errors.log';
        foreach ([$this->errorLog, $this->phpErrorLog] as $f) {
            touch($f);
            chmod($f, 0666);
        }
        $this->port = rl_free_port();

        $ini = [
            'error_reporting' => '-1',
            'display_errors' => '0',
            'display_startup_errors' => '1',
            'log_errors' => '1',
            'error_log' => $this->phpErrorLog,
            'max_execution_time' => '30',
            'auto_prepend_file' => __DIR__ . '/apache_prepend.php',
        ];
        foreach ($o['ini'] ?? [] as $k => $v) {
            $ini[$k] = (string) $v;
        }
        $iniText = 'extension=' . self::quote($this->so) . "\n";
        foreach ($ini as $k => $v) {
            $iniText .= $k . '=' . self::quote($v) . "\n";
        }
        file_put_contents($this->dir . '/php.ini', $iniText);

        $modules = '/usr/lib/apache2/modules';
        $lib = getenv('RL_APACHE_LIBPHP');
        $threads = self::THREADS;
        $all = self::PROCESSES * self::THREADS;
        $conf = <<<CONF
            ServerRoot "{$this->dir}"
            DefaultRuntimeDir "{$this->dir}"
            PidFile "{$this->dir}/httpd.pid"
            Mutex file:{$this->dir} default
            Listen 127.0.0.1:{$this->port}
            ServerName localhost
            ErrorLog "{$this->errorLog}"
            LogLevel warn
            User www-data
            Group www-data
            LoadModule mpm_event_module $modules/mod_mpm_event.so
            LoadModule authz_core_module $modules/mod_authz_core.so
            LoadModule php_module "$lib"
            # Two processes of 25 threads, all started at once and kept: every
            # request runs on a PHP thread, two processes share the work.
            StartServers 2
            ServerLimit 2
            ThreadLimit $threads
            ThreadsPerChild $threads
            MaxRequestWorkers $all
            MinSpareThreads $all
            MaxSpareThreads $all
            MaxConnectionsPerChild 0
            ListenBacklog 1024
            KeepAlive Off
            Timeout 60
            PHPIniDir "{$this->dir}"
            DocumentRoot "/"
            <Directory "/">
                Require all granted
                AllowOverride None
            </Directory>
            <FilesMatch "\\.php$">
                SetHandler application/x-httpd-php
            </FilesMatch>

            CONF;
        foreach ($o['admin'] ?? [] as $k => $v) {
            $conf .= "php_admin_value $k " . self::quote((string) $v) . "\n";
        }
        foreach ($o['values'] ?? [] as $k => $v) {
            $conf .= "php_value $k " . self::quote((string) $v) . "\n";
        }
        file_put_contents($this->dir . '/httpd.conf', $conf);

        $cmd = [trim((string) shell_exec('command -v setsid')) ?: '/usr/bin/setsid',
            self::binary(), '-f', $this->dir . '/httpd.conf', '-DFOREGROUND'];
        $this->proc = proc_open($cmd, [
            0 => ['file', '/dev/null', 'r'],
            1 => ['file', $this->dir . '/httpd.out', 'a'],
            2 => ['file', $this->dir . '/httpd.out', 'a'],
        ], $pipes, $this->dir, ['PATH' => getenv('PATH') ?: '/usr/bin:/bin', 'LANG' => 'C'] + ($o['env'] ?? []));
        if (!is_resource($this->proc)) {
            throw new RuntimeException('proc_open(apache2) failed');
        }
        $this->parentPid = proc_get_status($this->proc)['pid'];
        [$this->watchdog] = rl_group_watchdog($this->ownerPid, $this->parentPid, $this->dir);
        register_shutdown_function(function (): void {
            if (getmypid() === $this->ownerPid) {
                $this->stop();
            }
        });
        try {
            $this->awaitReady((float) ($o['start_timeout'] ?? 15.0));
        } catch (Throwable $e) {
            $log = $this->logs();
            $this->stop();
            throw new RuntimeException($e->getMessage() . "\n--- apache logs ---\n" . $log, 0, $e);
        }
    }

    /** An INI or Apache config value in double quotes; values that cannot be quoted are refused. */
    private static function quote(string $v): string
    {
        if (strpbrk($v, "\"\n\r\\") !== false || str_contains($v, '${')) {
            throw new ValueError('value not supported by ApachePool: ' . var_export($v, true));
        }
        return '"' . $v . '"';
    }

    private function awaitReady(float $timeout): void
    {
        $deadline = microtime(true) + $timeout;
        $probe = __DIR__ . '/apache_ready.php';
        $last = 'no answer';
        while (microtime(true) < $deadline) {
            if (!$this->running()) {
                throw new RuntimeException('apache2 exited during startup');
            }
            $r = $this->client()->request(FcgiClient::params($probe), '', 1.0);
            if ($r->ok() && $r->status === 200 && ($r->json()['zts'] ?? null) === true) {
                // Both children, with all their threads, before any test request.
                if (rl_wait_until(fn() => count($this->childPids()) === self::PROCESSES
                    && $this->threadsStarted() >= self::PROCESSES * self::THREADS,
                    max(0.0, $deadline - microtime(true)))) {
                    $this->children = $this->childPids();
                    return;
                }
                $last = count($this->childPids()) . ' children, ' . $this->threadsStarted() . ' threads';
                break;
            }
            $last = $r->describe();
            usleep(50000);
        }
        throw new RuntimeException(sprintf('apache2 did not answer within %.1f s (%s)', $timeout, $last));
    }

    /** FastCGI params in, FcgiResponse out, over HTTP (see FcgiClient's constructor). */
    public function client(): FcgiClient
    {
        return $this->client ??= new FcgiClient("http://127.0.0.1:{$this->port}");
    }

    public function running(): bool
    {
        return is_resource($this->proc) && proc_get_status($this->proc)['running'];
    }

    /** @return int[] Apache's live children (each a process of THREADS PHP threads), sorted. */
    public function childPids(): array
    {
        return rl_child_pids($this->parentPid);
    }

    /** Whether the children that started are still the ones serving (none crashed or was replaced). */
    public function intact(): bool
    {
        return $this->childPids() === $this->children && !str_contains($this->serverErrors(), 'exit signal');
    }

    /** Threads of the children, Apache's own and PHP's. */
    public function threadsStarted(): int
    {
        $n = 0;
        foreach ($this->childPids() as $pid) {
            $n += count(glob("/proc/$pid/task/*") ?: []);
        }
        return $n;
    }

    /** Names of the threads of child $pid (its /proc/PID/task/TID/comm). */
    public function threadNames(int $pid): array
    {
        $names = [];
        foreach (glob("/proc/$pid/task/*/comm") ?: [] as $f) {
            $names[] = trim((string) @file_get_contents($f));
        }
        return $names;
    }

    public function logs(): string
    {
        return rl_read_logs($this->dir, ['httpd.out', 'error.log', 'php-errors.log']);
    }

    public function phpErrors(): string
    {
        return (string) @file_get_contents($this->phpErrorLog);
    }

    /** Apache's error log: a child that crashed says so here ("exit signal"). */
    public function serverErrors(): string
    {
        return (string) @file_get_contents($this->errorLog);
    }

    /** Apache's graceful restart: PHP's module shutdown and startup run again in the same process. */
    public function graceful(): void
    {
        rl_kill_pid($this->parentPid, 'USR1');
    }

    /** Stop Apache (parent and children) and remove the temp directory. Idempotent. */
    public function stop(): void
    {
        if ($this->stopped) {
            return;
        }
        $this->stopped = true;
        if ($this->running()) {
            // SIGTERM: Apache stops its children and exits.
            rl_kill_pid($this->parentPid, 'TERM');
            rl_wait_until(fn() => !$this->running(), 10.0, 0.02);
        }
        // Whatever is left of the group.
        exec('kill -KILL -' . $this->parentPid . ' 2>/dev/null');
        if (is_resource($this->proc)) {
            proc_close($this->proc);
        }
        $this->proc = null;
        if (is_resource($this->watchdog)) {
            proc_terminate($this->watchdog, SIGKILL);
            proc_close($this->watchdog);
        }
        rl_remove_tree($this->dir);
    }
}

/**
 * The server of the tests that run on either (rw_fpm_hammer, semaphore_fpm_weighted):
 * php-fpm, or with RL_PHP_SERVER=apache Apache's mod_php in threads (the ZTS cell
 * runs them both ways). $options as FpmPool::start's.
 */
function rl_php_pool(array $options = []): FpmPool|ApachePool
{
    return getenv('RL_PHP_SERVER') === 'apache' ? ApachePool::start($options) : FpmPool::start($options);
}

/** Why rl_php_pool() cannot give the server asked for, or null. */
function rl_php_pool_unavailable(): ?string
{
    return getenv('RL_PHP_SERVER') === 'apache' ? ApachePool::unavailable() : null;
}
