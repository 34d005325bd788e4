<?php
/*
 * Pieces of the failover matrix (testing/failover/matrix.php): the clock, a
 * steady FastCGI load recording every outcome, the watcher and partition proxy
 * children, and the two topologies (Sentinel: a master, 2 replicas, 3 sentinels;
 * Cluster: 3 masters, 3 replicas) with the faults the cells inject.
 *
 * Every server is started on a free port by testing/fault_helpers.php (killed by
 * the kernel if this process dies, by a cleanup task otherwise); each topology's
 * stop() ends it early.
 */

require_once __DIR__ . '/../fault_helpers.php';
require_once __DIR__ . '/../../php-tests/fpm-app/harness.inc'; // FpmPool, FcgiClient, st_decode()

/** CLOCK_MONOTONIC in ns: what the workers, the watcher and the runner all stamp with. */
function mx_now(): int
{
    return hrtime(true);
}

/** ns -> s */
function mx_s(int|float $ns): float
{
    return $ns / 1e9;
}

/** Redis Cluster hash slot of $key (CRC16/XMODEM of the key or its hash tag, mod 16384). */
function mx_slot(string $key): int
{
    static $table = null;
    if ($table === null) {
        $table = [];
        for ($i = 0; $i < 256; $i++) {
            $crc = $i << 8;
            for ($j = 0; $j < 8; $j++) {
                $crc = ($crc & 0x8000) ? (($crc << 1) ^ 0x1021) & 0xFFFF : ($crc << 1) & 0xFFFF;
            }
            $table[$i] = $crc;
        }
    }
    $open = strpos($key, '{');
    if ($open !== false) {
        $close = strpos($key, '}', $open + 1);
        if ($close !== false && $close > $open + 1) {
            $key = substr($key, $open + 1, $close - $open - 1);
        }
    }
    $crc = 0;
    $n = strlen($key);
    for ($i = 0; $i < $n; $i++) {
        $crc = (($crc << 8) & 0xFFFF) ^ $table[(($crc >> 8) ^ ord($key[$i])) & 0xFF];
    }
    return $crc & 0x3FFF;
}

/** A child PHP process (no extension) running $script with $args; killed at cleanup. */
final class MxChild
{
    /** @var resource */
    private $proc;
    /** @var resource */
    public $stdin;
    /** @var resource */
    public $stdout;
    private string $buf = '';
    public readonly int $pid;

    public function __construct(string $script, array $args)
    {
        $cmd = [PHP_BINARY, '-n', '-d', 'error_reporting=-1', $script, ...$args];
        $setpriv = trim((string) shell_exec('command -v setpriv 2>/dev/null'));
        if ($setpriv !== '') {
            $cmd = [$setpriv, '--pdeathsig', 'KILL', '--', ...$cmd];
        }
        $this->proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        if (!is_resource($this->proc)) {
            throw new RuntimeException("cannot start $script");
        }
        [$this->stdin, $this->stdout] = [$pipes[0], $pipes[1]];
        stream_set_blocking($this->stdout, false);
        $this->pid = proc_get_status($this->proc)['pid'];
        rl_on_cleanup(fn() => $this->stop());
    }

    /** Complete lines printed so far (without blocking). */
    public function lines(): array
    {
        while (($c = fread($this->stdout, 65536)) !== false && $c !== '') {
            $this->buf .= $c;
        }
        $out = [];
        while (($nl = strpos($this->buf, "\n")) !== false) {
            $out[] = substr($this->buf, 0, $nl);
            $this->buf = substr($this->buf, $nl + 1);
        }
        return $out;
    }

    /** The next line, waiting up to $timeout s (null: none came). */
    public function line(float $timeout): ?string
    {
        $deadline = microtime(true) + $timeout;
        do {
            $nl = strpos($this->buf, "\n");
            if ($nl !== false) {
                $l = substr($this->buf, 0, $nl);
                $this->buf = substr($this->buf, $nl + 1);
                return $l;
            }
            $r = [$this->stdout];
            $w = $e = null;
            if (@stream_select($r, $w, $e, 0, 20000) > 0) {
                $c = fread($this->stdout, 65536);
                if ($c === '' && feof($this->stdout)) {
                    return null;
                }
                $this->buf .= (string) $c;
            }
        } while (microtime(true) < $deadline);
        return null;
    }

    public function send(string $line): void
    {
        fwrite($this->stdin, "$line\n");
    }

    public function stop(): void
    {
        if (is_resource($this->proc)) {
            @fclose($this->stdin);
            if (proc_get_status($this->proc)['running']) {
                rl_kill_pid($this->pid, 'KILL');
            }
            proc_close($this->proc);
        }
    }
}

/** The watcher child (watcher.php): events of the topology, stamped with hrtime. */
final class MxWatcher
{
    private MxChild $child;
    /** @var array<int, array{t:int, src:int, ev:string, data:mixed}> every event so far */
    public array $events = [];

    public function __construct(string $mode, array $ports)
    {
        $this->child = new MxChild(__DIR__ . '/watcher.php', [$mode, implode(',', $ports)]);
    }

    /** Read what came; the events so far. */
    public function poll(): array
    {
        foreach ($this->child->lines() as $l) {
            $j = json_decode($l, true);
            if (is_array($j)) {
                $this->events[] = $j;
            }
        }
        return $this->events;
    }

    /** The first event named $ev (optionally from/about $match) at or after $since, or null. */
    public function first(string $ev, int $since = 0, ?callable $match = null): ?array
    {
        foreach ($this->poll() as $e) {
            if ($e['ev'] === $ev && $e['t'] >= $since && ($match === null || $match($e))) {
                return $e;
            }
        }
        return null;
    }

    public function stop(): void
    {
        $this->child->stop();
    }
}

/**
 * A steady FastCGI load (as testing/fault_load.php) that stamps every request
 * with hrtime and keeps its decoded JSON reply. It drives one or more lanes,
 * each a php-fpm pool with its own requests: `concurrency` requests in flight
 * (more than the pool's workers, so some always queue), optionally paced to
 * `rate` requests per second.
 */
final class MxLoad
{
    /** Ended requests: ['n', 'lane', 'meta', 'c0' (client begin, ns), 'c1' (client end), 'r' (reply array|null), 'error' (?string)]. */
    public array $results = [];
    private array $active = [];
    private int $seq = 0;

    /**
     * @param array<int|string, array{client: FcgiClient, concurrency: int, next: callable, rate: ?float}> $lanes
     *        next(int $i): [params, meta], $i counting the lane's requests
     */
    public function __construct(private array $lanes, private float $requestTimeout)
    {
        foreach ($this->lanes as &$l) {
            $l += ['begun' => 0, 'active' => 0, 'pace0' => null, 'rate' => null];
        }
    }

    /** Keep the load going for $seconds (or until $until() says stop). */
    public function run(float $seconds, ?callable $until = null): bool
    {
        $deadline = mx_now() + (int) ($seconds * 1e9);
        while (mx_now() < $deadline) {
            if ($until !== null && $until()) {
                return true;
            }
            $this->step(true);
        }
        return $until !== null && $until();
    }

    /** Start nothing new; wait (bounded) for those in flight; cut off the rest (recorded as stuck). */
    public function drain(float $timeout): void
    {
        $deadline = mx_now() + (int) ($timeout * 1e9);
        while ($this->active !== [] && mx_now() < $deadline) {
            $this->step(false);
        }
        foreach ($this->active as $a) {
            $a['call']->finish(sprintf('no answer within %.1f s (drain)', $timeout));
        }
        $this->collect();
    }

    private function step(bool $start): void
    {
        if ($start) {
            $now = mx_now();
            foreach ($this->lanes as $id => &$l) {
                if ($l['rate'] !== null && $l['pace0'] === null) {
                    $l['pace0'] = [$now, $l['begun']];
                }
                while ($l['active'] < $l['concurrency']
                    && ($l['rate'] === null || $l['begun'] - $l['pace0'][1] < mx_s($now - $l['pace0'][0]) * $l['rate'])) {
                    [$params, $meta] = ($l['next'])($l['begun']++);
                    $l['active']++;
                    $this->active[$this->seq++] = ['call' => $l['client']->begin($params), 'lane' => $id, 'meta' => $meta, 'c0' => mx_now()];
                }
            }
            unset($l);
        }
        $calls = array_column($this->active, 'call');
        if ($calls !== []) {
            FcgiClient::pump($calls, 0.005);
        } else {
            usleep(2000);
        }
        $this->collect();
    }

    private function collect(): void
    {
        $now = mx_now();
        foreach ($this->active as $n => $a) {
            $call = $a['call'];
            if (!$call->done && mx_s($now - $a['c0']) > $this->requestTimeout) {
                $call->finish(sprintf('no answer within %.1f s', $this->requestTimeout));
            }
            if ($call->done) {
                $resp = $call->response;
                $j = $resp->ok() ? $resp->json() : null;
                $this->results[] = ['n' => $n, 'lane' => $a['lane'], 'meta' => $a['meta'], 'c0' => $a['c0'], 'c1' => $now,
                    'r' => is_array($j) ? $j : null,
                    'error' => is_array($j) ? null : $resp->describe()];
                $this->lanes[$a['lane']]['active']--;
                unset($this->active[$n]);
            }
        }
    }
}

/** Ports of servers killed for good, held until the cell ends so no other server takes them. */
function mx_hold_port(int $port): void
{
    $ok = rl_wait_until(static function () use ($port): bool {
        $s = @stream_socket_server("tcp://127.0.0.1:$port");
        if ($s !== false) {
            $GLOBALS['mx_held_ports'][$port] = $s;
        }
        return $s !== false;
    }, 5.0, 0.005);
    if (!$ok) {
        throw new RuntimeException("could not hold port $port");
    }
}

function mx_release_port(int $port): void
{
    if (isset($GLOBALS['mx_held_ports'][$port])) {
        fclose($GLOBALS['mx_held_ports'][$port]);
        unset($GLOBALS['mx_held_ports'][$port]);
    }
}

/* ------------------------------------------------------------------ */
/* Sentinel: a master, 2 replicas (a new master has a replica at once), 3 sentinels. */

final class SentinelTopo
{
    public const SERVICE = 'mxsvc';
    /** @var array<int, array> port => server (fault_start_redis() array) */
    public array $nodes = [];
    public array $sentinels = [];
    public int $master;
    /** Where sentinels and replicas reach the master: its own port, or the partition proxy's. */
    public int $masterAddr;
    public ?MxChild $proxy = null;

    /** Replication settings of every node (fast full syncs). */
    public const SYNC = ['--repl-diskless-sync-delay', '0', '--repl-diskless-sync', 'yes'];

    public function __construct(bool $viaProxy)
    {
        $sync = self::SYNC;
        $m = fault_start_redis($sync);
        $this->nodes[$m['port']] = $m;
        $this->master = $m['port'];
        $this->masterAddr = $m['port'];
        if ($viaProxy) {
            $this->proxy = new MxChild(__DIR__ . '/partition_proxy.php', [(string) $m['port']]);
            $hello = json_decode((string) $this->proxy->line(5.0), true);
            if (!isset($hello['listening'])) {
                throw new RuntimeException('partition proxy did not start');
            }
            $this->masterAddr = (int) $hello['listening'];
            // Replicas announce their own port (not the proxy's) to the master and so
            // to the sentinels; the master's own address stays the proxy's.
        }
        for ($i = 0; $i < 2; $i++) {
            $r = fault_start_redis([...$sync, '--replicaof', '127.0.0.1', (string) $this->masterAddr]);
            $this->nodes[$r['port']] = $r;
        }
        $dir = fault_tempdir('mxsent');
        for ($i = 0; $i < 3; $i++) {
            $addr = $this->masterAddr;
            $this->sentinels[] = fault_start_server(static function (string $bin, int $p) use ($dir, $addr): array {
                file_put_contents("$dir/s-$p.conf", "port $p\nbind 127.0.0.1\ndir $dir\n"
                    . 'sentinel monitor ' . self::SERVICE . " 127.0.0.1 $addr 2\n"
                    . 'sentinel down-after-milliseconds ' . self::SERVICE . " 1000\n"
                    . 'sentinel failover-timeout ' . self::SERVICE . " 2000\n"
                    . 'sentinel parallel-syncs ' . self::SERVICE . " 2\n");
                return [$bin, "$dir/s-$p.conf", '--sentinel'];
            });
        }
        if (!rl_wait_until(fn() => $this->ready(), 30.0, 0.05)) {
            throw new RuntimeException('sentinel topology not ready: ' . $this->describe());
        }
    }

    /** Both replicas online and acknowledging; every sentinel knows 2 replicas and 2 other sentinels. */
    public function ready(): bool
    {
        try {
            $raw = new RlRaw($this->master, 1.0);
            $raw->cmd('SET', 'mx:probe', '1');
            if ($raw->cmd('WAIT', 2, 200) < 2) {
                return false;
            }
            foreach ($this->sentinels as $s) {
                $sr = new RlRaw($s['port'], 1.0);
                $reps = $sr->cmd('SENTINEL', 'replicas', self::SERVICE);
                if (count($sr->cmd('SENTINEL', 'sentinels', self::SERVICE)) !== 2 || count($reps) !== 2) {
                    return false;
                }
                foreach ($reps as $rep) {
                    $f = array_combine(array_values(array_filter($rep, fn($k) => $k % 2 === 0, ARRAY_FILTER_USE_KEY)),
                        array_values(array_filter($rep, fn($k) => $k % 2 === 1, ARRAY_FILTER_USE_KEY)));
                    if ($f['flags'] !== 'slave' || ($f['master-link-status'] ?? '') !== 'ok') {
                        return false;
                    }
                }
            }
            return true;
        } catch (Throwable) {
            return false;
        }
    }

    public function describe(): string
    {
        $out = [];
        foreach ($this->sentinels as $s) {
            try {
                $out[] = json_encode((new RlRaw($s['port'], 1.0))->cmd('SENTINEL', 'replicas', self::SERVICE));
            } catch (Throwable $e) {
                $out[] = $e->getMessage();
            }
        }
        return implode("\n", $out);
    }

    public function dsn(int $wait, bool $session): string
    {
        $hosts = implode(',', array_map(fn($s) => "127.0.0.1:{$s['port']}", $this->sentinels));
        $q = 'connect_timeout=' . MX_TIMEOUT . '&read_timeout=' . MX_TIMEOUT
            . ($wait > 0 ? "&wait_replicas=$wait&wait_timeout=" . MX_WAIT_TIMEOUT_MS : '')
            . ($session ? '&prefix=' . MX_PREFIX : '');
        return "redis-sentinel://$hosts/" . self::SERVICE . "?$q";
    }

    public function watcherArgs(): array
    {
        return ['sentinel', array_map(fn($s) => $s['port'], $this->sentinels)];
    }

    /** The master's port as the first sentinel that answers names it (the proxy means the old master). */
    public function currentMaster(): ?int
    {
        foreach ($this->sentinels as $s) {
            try {
                $r = (new RlRaw($s['port'], 1.0))->cmd('SENTINEL', 'get-master-addr-by-name', self::SERVICE);
                if (is_array($r)) {
                    $p = (int) $r[1];
                    return $p === $this->masterAddr ? $this->master : $p;
                }
            } catch (Throwable) {
            }
        }
        return null;
    }

    /** Whether every sentinel names the same master, other than $old (the failover is over everywhere). */
    public function allNameNew(int $old): bool
    {
        $seen = [];
        foreach ($this->sentinels as $s) {
            try {
                $r = (new RlRaw($s['port'], 1.0))->cmd('SENTINEL', 'get-master-addr-by-name', self::SERVICE);
                $seen[] = is_array($r) ? (int) $r[1] : null;
            } catch (Throwable) {
                return false;
            }
        }
        return count(array_unique($seen)) === 1 && $seen[0] !== null && $seen[0] !== $old && $seen[0] !== $this->masterAddr;
    }

    /** Raw value of $key on the master the sentinels name now. */
    public function finalGet(string $key): ?string
    {
        return (new RlRaw((int) $this->currentMaster(), 2.0))->cmd('GET', $key);
    }

    public function stop(): void
    {
        $this->proxy?->stop();
        foreach ([...$this->sentinels, ...array_values($this->nodes)] as $s) {
            ($s['stop'])();
        }
    }
}

/* ------------------------------------------------------------------ */
/* Cluster: 3 masters + 3 replicas; the fault hits "the victim", the master of slot 0's range. */

final class ClusterTopo
{
    public array $nodes;
    public int $victim;
    public int $replica;
    /** @var array<int, array{0:int,1:int}> slot ranges of the victim */
    public array $ranges = [];

    public function __construct()
    {
        $this->nodes = fault_start_cluster(3, 1);
        $raw = new RlRaw($this->nodes[0]['port']);
        $slots = $raw->cmd('CLUSTER', 'SLOTS');
        usort($slots, fn($a, $b) => $a[0] <=> $b[0]);
        $this->victim = (int) $slots[0][2][1];
        foreach ($slots as $r) {
            if ((int) $r[2][1] === $this->victim) {
                $this->ranges[] = [(int) $r[0], (int) $r[1]];
            }
        }
        // Its replica, as the master itself tells (CLUSTER SLOTS may not list it yet).
        if (!preg_match('/slave0:ip=[^,]+,port=(\d+),state=online/', (string) (new RlRaw($this->victim))->cmd('INFO', 'replication'), $m)) {
            throw new RuntimeException('the victim master has no replica online');
        }
        $this->replica = (int) $m[1];
        // Every node knows the replica as the victim's (a manual failover needs the
        // other masters' votes for it).
        $victimId = (new RlRaw($this->victim))->cmd('CLUSTER', 'MYID');
        $known = rl_wait_until(function () use ($victimId): bool {
            foreach ($this->nodes as $n) {
                $seen = false;
                foreach (explode("\n", (string) (new RlRaw($n['port']))->cmd('CLUSTER', 'NODES')) as $line) {
                    $f = explode(' ', $line);
                    $seen = $seen || (str_starts_with($f[1] ?? '', "127.0.0.1:{$this->replica}@")
                        && str_contains($f[2], 'slave') && ($f[3] ?? '') === $victimId);
                }
                if (!$seen) {
                    return false;
                }
            }
            return true;
        }, 20.0, 0.05);
        if (!$known) {
            throw new RuntimeException('not every node knows the replica');
        }
    }

    public function node(int $port): array
    {
        foreach ($this->nodes as $n) {
            if ($n['port'] === $port) {
                return $n;
            }
        }
        throw new RuntimeException("no node $port");
    }

    public function onVictim(int $slot): bool
    {
        foreach ($this->ranges as [$a, $b]) {
            if ($a <= $slot && $slot <= $b) {
                return true;
            }
        }
        return false;
    }

    public function dsn(int $wait, bool $session): string
    {
        $seeds = implode(',', fault_cluster_seeds($this->nodes));
        $q = 'connect_timeout=' . MX_TIMEOUT . '&read_timeout=' . MX_TIMEOUT
            . ($wait > 0 ? "&wait_replicas=$wait&wait_timeout=" . MX_WAIT_TIMEOUT_MS : '')
            . ($session ? '&prefix=' . MX_PREFIX : '');
        return "redis-cluster://$seeds?$q";
    }

    public function watcherArgs(): array
    {
        return ['cluster', [$this->replica]];
    }

    /** A live node's port (to ask about the cluster). */
    public function live(): int
    {
        foreach ($this->nodes as $n) {
            if (proc_get_status($n['proc'])['running'] && fault_proc_state($n['pid']) !== 'T' && rl_ping($n['port'])) {
                return $n['port'];
            }
        }
        throw new RuntimeException('no live cluster node');
    }

    /** Raw value of $key on the master serving its slot now. */
    public function finalGet(string $key): ?string
    {
        [, $port] = fault_cluster_owner($this->live(), $key);
        return (new RlRaw($port, 2.0))->cmd('GET', $key);
    }

    public function stop(): void
    {
        foreach ($this->nodes as $n) {
            ($n['stop'])();
        }
    }
}
