<?php
/*
 * A fault-injecting TCP proxy for Redis (RESP2), for the fault_*.phpt tests.
 *
 * It sits between the extension and a redis-server, forwards every command and
 * every reply, and can be told to break things at a precise point:
 *
 *   cut   forward the next matching command to Redis, wait for Redis's reply
 *         (so the command certainly ran), drop that reply and close the
 *         client's connection: the client sees its connection break after its
 *         command was sent, without ever learning the outcome.
 *   hold  do not forward the next matching command; keep its bytes and close
 *         the client's connection. `flush` later delivers the held commands to
 *         Redis on a fresh connection: a late arrival of a command whose sender
 *         gave up on it (as when it sat in a socket buffer).
 *   stall as hold, but leave the client's connection open and silent: the
 *         client's read times out (a stopped or overloaded Redis), and the
 *         command reaches Redis only when `flush` delivers it.
 *   down  stop listening and close every connection (connections are refused);
 *   up    listen again on the same port.
 *
 * A rule matches a command whose raw bytes contain every one of its needles
 * (e.g. a key name and ":fence"), is used once, and may take the proxy down at
 * the very moment it fires ('then' => 'down'), before the client can reconnect.
 *
 * Test side (this file is also a library):
 *
 *   require 'testing/fault_proxy.php';
 *   $proxy = FaultProxy::start($redisPort);        // child process, stopped at cleanup
 *   $dsn = $proxy->dsn('read_timeout=1');          // redis://127.0.0.1:<proxy port>?read_timeout=1
 *   $proxy->arm('cut', ['lock:{k}', ':fence']);    // next acquire script of key k
 *   ... $lock->acquire() ...
 *   $ev = $proxy->awaitEvent('cut', 5.0);          // ['command' => [...], 'reply' => [...]]
 *   $proxy->flush();                               // held commands -> Redis; returns their replies
 *
 * Server side: `php fault_proxy.php <upstream port>` prints one JSON line
 * {"type":"listening","port":N}, then reads JSON commands from stdin (one per
 * line) and writes JSON lines to stdout: a {"type":"reply",...} per command,
 * and {"type":"event",...} whenever a rule fires. It exits when stdin closes.
 * Plain PHP streams only (no extension needed), one process, stream_select().
 */

/* ------------------------------------------------------------------ */
/* RESP2 framing, shared by both sides */

/**
 * Offset just past the complete RESP value that starts at $pos in $buf, or
 * null when $buf does not hold all of it yet. Client commands are arrays of
 * bulk strings; replies may be any RESP2 type. An inline command (a line not
 * starting with a type byte) ends at its CRLF.
 */
function fp_resp_end(string $buf, int $pos = 0): ?int
{
    if ($pos >= strlen($buf)) {
        return null;
    }
    $eol = strpos($buf, "\r\n", $pos);
    if ($eol === false) {
        return null;
    }
    $type = $buf[$pos];
    $head = substr($buf, $pos + 1, $eol - $pos - 1);
    $next = $eol + 2;
    switch ($type) {
        case '+':
        case '-':
        case ':':
            return $next;
        case '$':
            $len = (int) $head;
            if ($len < 0) {
                return $next; // null bulk string
            }
            return strlen($buf) >= $next + $len + 2 ? $next + $len + 2 : null;
        case '*':
            $n = (int) $head;
            for ($i = 0; $i < $n; $i++) {
                $next = fp_resp_end($buf, $next);
                if ($next === null) {
                    return null;
                }
            }
            return $next;
        default:
            return $next; // inline command
    }
}

/**
 * Decode the complete RESP value at $pos (advancing $pos) into PHP values:
 * simple strings and bulk strings as strings, integers as ints, null bulks and
 * arrays as null, arrays as lists, errors as ['error' => message].
 */
function fp_resp_decode(string $buf, int &$pos = 0): mixed
{
    $eol = strpos($buf, "\r\n", $pos);
    $type = $buf[$pos];
    $head = substr($buf, $pos + 1, $eol - $pos - 1);
    $pos = $eol + 2;
    switch ($type) {
        case '+':
            return $head;
        case '-':
            return ['error' => $head];
        case ':':
            return (int) $head;
        case '$':
            $len = (int) $head;
            if ($len < 0) {
                return null;
            }
            $s = substr($buf, $pos, $len);
            $pos += $len + 2;
            return $s;
        case '*':
            $n = (int) $head;
            if ($n < 0) {
                return null;
            }
            $out = [];
            for ($i = 0; $i < $n; $i++) {
                $out[] = fp_resp_decode($buf, $pos);
            }
            return $out;
        default:
            return $type . $head; // inline command: the line itself
    }
}

/** A short printable form of a command for events: its words, long ones cut. */
function fp_describe_command(string $raw): array
{
    $pos = 0;
    $v = fp_resp_decode($raw, $pos);
    $words = is_array($v) ? $v : [(string) $v];
    return array_map(static function ($w): string {
        $w = is_string($w) ? $w : json_encode($w);
        return strlen($w) > 80 ? substr($w, 0, 80) . '...' : $w;
    }, $words);
}

/* ------------------------------------------------------------------ */
/* Server side: the proxy process */

/** One client connection and its own connection to Redis. */
final class FpPair
{
    /** @var resource */
    public $client;
    /** @var resource */
    public $upstream;
    /** Client bytes not yet framed into whole commands. */
    public string $fromClient = '';
    /** Redis bytes not yet framed into whole replies. */
    public string $fromUpstream = '';
    /** Bytes waiting to be written to Redis / to the client. */
    public string $toUpstream = '';
    public string $toClient = '';
    /**
     * One entry per command forwarded and not yet answered, oldest first:
     * null for an ordinary command, the rule for a command being cut.
     */
    public array $pending = [];
    public bool $closed = false;
    /** A command of this client is stalled: nothing more of it is forwarded. */
    public bool $stalled = false;

    public function __construct($client, $upstream)
    {
        $this->client = $client;
        $this->upstream = $upstream;
    }

    public function close(): void
    {
        if ($this->closed) {
            return;
        }
        $this->closed = true;
        @fclose($this->client);
        @fclose($this->upstream);
    }
}

final class FaultProxyServer
{
    /** @var resource|null the listening socket; null while down */
    private $listener = null;
    /** @var FpPair[] */
    private array $pairs = [];
    /** The armed rule: ['action' => 'cut'|'hold'|'stall', 'match' => [needles], 'then' => null|'down'], or null. */
    private ?array $rule = null;
    /** Raw bytes of held commands, in arrival order. */
    private array $held = [];
    private array $stats = ['accepted' => 0, 'forwarded' => 0, 'cuts' => 0, 'holds' => 0, 'refused_upstream' => 0];
    private string $stdinBuf = '';

    public function __construct(private int $upstreamPort, private int $port)
    {
    }

    public static function main(array $argv): int
    {
        $upstream = (int) ($argv[1] ?? 0);
        if ($upstream <= 0) {
            fwrite(STDERR, "usage: php fault_proxy.php <upstream port> [<listen port>]\n");
            return 2;
        }
        $server = new FaultProxyServer($upstream, (int) ($argv[2] ?? 0));
        return $server->run();
    }

    private function out(array $msg): void
    {
        fwrite(STDOUT, json_encode($msg, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES) . "\n");
        fflush(STDOUT);
    }

    private function listen(): ?string
    {
        // PHP sets SO_REUSEADDR on server sockets, so `up` can bind the same
        // port again right after `down` closed it.
        $s = @stream_socket_server('tcp://127.0.0.1:' . $this->port, $errno, $errstr);
        if ($s === false) {
            return "cannot listen on port {$this->port}: $errstr";
        }
        stream_set_blocking($s, false);
        $name = stream_socket_get_name($s, false);
        $this->port = (int) substr($name, strrpos($name, ':') + 1);
        $this->listener = $s;
        return null;
    }

    private function goDown(): void
    {
        if ($this->listener !== null) {
            fclose($this->listener);
            $this->listener = null;
        }
        foreach ($this->pairs as $p) {
            $p->close();
        }
        $this->pairs = [];
    }

    public function run(): int
    {
        $err = $this->listen();
        if ($err !== null) {
            $this->out(['type' => 'error', 'message' => $err]);
            return 1;
        }
        stream_set_blocking(STDIN, false);
        $this->out(['type' => 'listening', 'port' => $this->port]);

        while (true) {
            $this->pairs = array_values(array_filter($this->pairs, static fn(FpPair $p) => !$p->closed));
            $read = [STDIN];
            $write = [];
            if ($this->listener !== null) {
                $read[] = $this->listener;
            }
            foreach ($this->pairs as $p) {
                $read[] = $p->client;
                $read[] = $p->upstream;
                if ($p->toUpstream !== '') {
                    $write[] = $p->upstream;
                }
                if ($p->toClient !== '') {
                    $write[] = $p->client;
                }
            }
            $except = null;
            if (@stream_select($read, $write, $except, 1) === false) {
                continue; // interrupted by a signal
            }
            foreach ($read as $s) {
                if ($s === STDIN) {
                    if (!$this->onControl()) {
                        $this->goDown();
                        return 0;
                    }
                } elseif ($s === $this->listener) {
                    $this->onAccept();
                } else {
                    $this->onReadable($s);
                }
            }
            foreach ($write as $s) {
                $this->onWritable($s);
            }
        }
    }

    private function pairOf($sock): ?FpPair
    {
        foreach ($this->pairs as $p) {
            if (!$p->closed && ($p->client === $sock || $p->upstream === $sock)) {
                return $p;
            }
        }
        return null;
    }

    private function onAccept(): void
    {
        $c = @stream_socket_accept($this->listener, 0);
        if ($c === false) {
            return;
        }
        $this->stats['accepted']++;
        $u = @stream_socket_client('tcp://127.0.0.1:' . $this->upstreamPort, $errno, $errstr, 2.0);
        if ($u === false) {
            // Redis is down: the client sees its connection closed at once.
            $this->stats['refused_upstream']++;
            fclose($c);
            return;
        }
        foreach ([$c, $u] as $s) {
            stream_set_blocking($s, false);
            stream_set_read_buffer($s, 0);
            stream_set_write_buffer($s, 0);
        }
        $this->pairs[] = new FpPair($c, $u);
    }

    private function onReadable($sock): void
    {
        $p = $this->pairOf($sock);
        if ($p === null) {
            return;
        }
        $chunk = @fread($sock, 65536);
        if ($chunk === false || $chunk === '') {
            if ($chunk === false || feof($sock)) {
                $p->close(); // either side hung up: close both
            }
            return;
        }
        if ($sock === $p->client) {
            $p->fromClient .= $chunk;
            $this->onClientBytes($p);
        } else {
            $p->fromUpstream .= $chunk;
            $this->onUpstreamBytes($p);
        }
    }

    private function matches(string $raw): bool
    {
        if ($this->rule === null) {
            return false;
        }
        foreach ($this->rule['match'] as $needle) {
            if (!str_contains($raw, $needle)) {
                return false;
            }
        }
        return true;
    }

    /** Frame whole commands from the client; forward, cut or hold each one. */
    private function onClientBytes(FpPair $p): void
    {
        while (!$p->closed && !$p->stalled && ($end = fp_resp_end($p->fromClient)) !== null) {
            $raw = substr($p->fromClient, 0, $end);
            $p->fromClient = (string) substr($p->fromClient, $end);
            if ($this->matches($raw)) {
                $rule = $this->rule;
                $this->rule = null; // one-shot
                if ($rule['action'] === 'hold' || $rule['action'] === 'stall') {
                    $this->held[] = $raw;
                    $this->stats['holds']++;
                    if ($rule['action'] === 'stall') {
                        // Nothing more is read from this client: it waits for a reply
                        // that never comes, until it gives up and closes.
                        $p->stalled = true;
                        $this->out(['type' => 'event', 'event' => 'stall', 'command' => fp_describe_command($raw)]);
                        return;
                    }
                    $p->close();
                    $this->out(['type' => 'event', 'event' => 'hold', 'command' => fp_describe_command($raw)]);
                    if ($rule['then'] === 'down') {
                        $this->goDown();
                    }
                    return;
                }
                // cut: forward it, and remember to swallow its reply.
                $rule['command'] = $raw;
                $p->pending[] = $rule;
            } else {
                $p->pending[] = null;
            }
            $p->toUpstream .= $raw;
            $this->stats['forwarded']++;
        }
        $this->onWritable($p->upstream);
    }

    /** Frame whole replies from Redis; relay each, or swallow the cut one and break the connection. */
    private function onUpstreamBytes(FpPair $p): void
    {
        while (!$p->closed && ($end = fp_resp_end($p->fromUpstream)) !== null) {
            $raw = substr($p->fromUpstream, 0, $end);
            $p->fromUpstream = (string) substr($p->fromUpstream, $end);
            $rule = array_shift($p->pending);
            if ($rule === null) {
                $p->toClient .= $raw;
                continue;
            }
            // The cut command has run in Redis; its reply never reaches the client.
            // Relay what is due before it (nothing, for a client that waits for
            // each reply), then break the connection.
            $this->onWritable($p->client);
            $pos = 0;
            $reply = fp_resp_decode($raw, $pos);
            $this->stats['cuts']++;
            $p->close();
            $this->out(['type' => 'event', 'event' => 'cut',
                'command' => fp_describe_command($rule['command']), 'reply' => $reply]);
            if ($rule['then'] === 'down') {
                $this->goDown();
            }
            return;
        }
        $this->onWritable($p->client);
    }

    private function onWritable($sock): void
    {
        $p = $this->pairOf($sock);
        if ($p === null) {
            return;
        }
        $buf = $sock === $p->client ? 'toClient' : 'toUpstream';
        if ($p->$buf === '') {
            return;
        }
        $n = @fwrite($sock, $p->$buf);
        if ($n === false) {
            $p->close();
            return;
        }
        $p->$buf = (string) substr($p->$buf, $n);
    }

    /** Handle control lines from stdin. False when stdin has closed (the test is gone). */
    private function onControl(): bool
    {
        $chunk = fread(STDIN, 65536);
        if ($chunk === false || ($chunk === '' && feof(STDIN))) {
            return false;
        }
        $this->stdinBuf .= $chunk;
        while (($nl = strpos($this->stdinBuf, "\n")) !== false) {
            $line = substr($this->stdinBuf, 0, $nl);
            $this->stdinBuf = substr($this->stdinBuf, $nl + 1);
            $cmd = json_decode($line, true);
            if (!is_array($cmd)) {
                $this->out(['type' => 'reply', 'ok' => false, 'error' => 'not JSON: ' . $line]);
                continue;
            }
            $this->out(['type' => 'reply'] + $this->control($cmd));
        }
        return true;
    }

    private function control(array $cmd): array
    {
        switch ($cmd['cmd'] ?? '') {
            case 'arm':
                if (!in_array($cmd['action'] ?? '', ['cut', 'hold', 'stall'], true) || empty($cmd['match'])) {
                    return ['ok' => false, 'error' => 'arm needs action cut|hold|stall and match'];
                }
                $this->rule = ['action' => $cmd['action'], 'match' => array_values($cmd['match']),
                    'then' => $cmd['then'] ?? null];
                return ['ok' => true];
            case 'disarm':
                $this->rule = null;
                return ['ok' => true];
            case 'down':
                $this->goDown();
                return ['ok' => true];
            case 'up':
                if ($this->listener !== null) {
                    return ['ok' => true];
                }
                $err = $this->listen();
                return $err === null ? ['ok' => true] : ['ok' => false, 'error' => $err];
            case 'flush':
                return $this->flushHeld();
            case 'stats':
                return ['ok' => true, 'stats' => $this->stats + ['held' => count($this->held),
                    'connections' => count(array_filter($this->pairs, static fn(FpPair $p) => !$p->closed)),
                    'up' => $this->listener !== null, 'armed' => $this->rule !== null]];
        }
        return ['ok' => false, 'error' => 'unknown command'];
    }

    /** Deliver the held commands to Redis on a fresh connection; return Redis's replies. */
    private function flushHeld(): array
    {
        if ($this->held === []) {
            return ['ok' => true, 'replies' => []];
        }
        $u = @stream_socket_client('tcp://127.0.0.1:' . $this->upstreamPort, $errno, $errstr, 2.0);
        if ($u === false) {
            return ['ok' => false, 'error' => "cannot reach Redis: $errstr"];
        }
        stream_set_timeout($u, 5);
        $replies = [];
        foreach ($this->held as $raw) {
            fwrite($u, $raw);
            $buf = '';
            while (($end = fp_resp_end($buf)) === null) {
                $chunk = fread($u, 65536);
                if ($chunk === false || $chunk === '') {
                    fclose($u);
                    return ['ok' => false, 'error' => 'no reply from Redis to a held command'];
                }
                $buf .= $chunk;
            }
            $pos = 0;
            $replies[] = ['command' => fp_describe_command($raw), 'reply' => fp_resp_decode($buf, $pos)];
        }
        fclose($u);
        $this->held = [];
        return ['ok' => true, 'replies' => $replies];
    }
}

/* ------------------------------------------------------------------ */
/* Test side: start and steer a proxy process */

final class FaultProxy
{
    public readonly int $port;
    /** @var resource */
    private $proc;
    /** @var resource */
    private $stdin;
    /** @var resource */
    private $stdout;
    private string $buf = '';
    /** Events read while waiting for a reply, oldest first. */
    private array $events = [];
    private int $pid;

    /** Start a proxy in front of the redis-server on 127.0.0.1:$upstreamPort. */
    public static function start(int $upstreamPort): FaultProxy
    {
        return new FaultProxy($upstreamPort);
    }

    private function __construct(int $upstreamPort)
    {
        $php = getenv('TEST_PHP_EXECUTABLE') ?: PHP_BINARY;
        $cmd = [$php, '-n', __FILE__, (string) $upstreamPort];
        // As for redis-server: the kernel kills the proxy if the test dies.
        $setpriv = trim((string) shell_exec('command -v setpriv 2>/dev/null'));
        if ($setpriv !== '') {
            $cmd = array_merge([$setpriv, '--pdeathsig', 'KILL', '--'], $cmd);
        }
        $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        if (!is_resource($proc)) {
            throw new RuntimeException('proc_open(fault proxy) failed');
        }
        $this->proc = $proc;
        $this->stdin = $pipes[0];
        $this->stdout = $pipes[1];
        $this->pid = proc_get_status($proc)['pid'];
        stream_set_blocking($this->stdout, false);
        if (function_exists('rl_on_cleanup')) {
            rl_on_cleanup(fn() => $this->stop());
        }
        $hello = $this->readMessage(5.0);
        if (($hello['type'] ?? '') !== 'listening') {
            $this->stop();
            throw new RuntimeException('fault proxy did not start: ' . json_encode($hello));
        }
        $this->port = (int) $hello['port'];
    }

    /** A DSN that goes through the proxy, with optional query parameters. */
    public function dsn(string $query = ''): string
    {
        return "redis://127.0.0.1:{$this->port}" . ($query !== '' ? "?$query" : '');
    }

    /** Next JSON line from the proxy, or null after $timeout seconds. */
    private function readMessage(float $timeout): ?array
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            $nl = strpos($this->buf, "\n");
            if ($nl !== false) {
                $line = substr($this->buf, 0, $nl);
                $this->buf = substr($this->buf, $nl + 1);
                $msg = json_decode($line, true);
                return is_array($msg) ? $msg : ['type' => 'garbage', 'line' => $line];
            }
            $left = $deadline - microtime(true);
            if ($left <= 0 || feof($this->stdout)) {
                return null;
            }
            $r = [$this->stdout];
            $w = $e = null;
            if (@stream_select($r, $w, $e, (int) $left, (int) (fmod($left, 1.0) * 1e6)) > 0) {
                $chunk = fread($this->stdout, 65536);
                if ($chunk !== false) {
                    $this->buf .= $chunk;
                }
            }
        }
    }

    /** Send one control command and return its reply (events seen meanwhile are queued). */
    public function command(array $cmd, float $timeout = 5.0): array
    {
        fwrite($this->stdin, json_encode($cmd) . "\n");
        fflush($this->stdin);
        $deadline = microtime(true) + $timeout;
        while (($left = $deadline - microtime(true)) > 0) {
            $msg = $this->readMessage($left);
            if ($msg === null) {
                break;
            }
            if (($msg['type'] ?? '') === 'reply') {
                if (empty($msg['ok'])) {
                    throw new RuntimeException('fault proxy refused ' . json_encode($cmd) . ': ' . json_encode($msg));
                }
                return $msg;
            }
            $this->events[] = $msg;
        }
        throw new RuntimeException('fault proxy did not answer ' . json_encode($cmd));
    }

    /**
     * Arm a one-shot rule for the next command containing every string in
     * $match: 'cut' (forward, swallow the reply, break the connection) or
     * 'hold' (keep it undelivered, break the connection). $then 'down': stop
     * accepting connections in the same instant.
     */
    public function arm(string $action, array $match, ?string $then = null): void
    {
        $this->command(['cmd' => 'arm', 'action' => $action, 'match' => $match, 'then' => $then]);
    }

    public function disarm(): void
    {
        $this->command(['cmd' => 'disarm']);
    }

    public function down(): void
    {
        $this->command(['cmd' => 'down']);
    }

    public function up(): void
    {
        $this->command(['cmd' => 'up']);
    }

    /** Deliver held commands to Redis now; returns [['command' => [...], 'reply' => ...], ...]. */
    public function flush(): array
    {
        return $this->command(['cmd' => 'flush'])['replies'];
    }

    public function stats(): array
    {
        return $this->command(['cmd' => 'stats'])['stats'];
    }

    /** The first queued or arriving event named $name within $timeout seconds, else null. */
    public function awaitEvent(string $name, float $timeout = 5.0): ?array
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            foreach ($this->events as $i => $ev) {
                if (($ev['event'] ?? '') === $name) {
                    array_splice($this->events, $i, 1);
                    return $ev;
                }
            }
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                return null;
            }
            $msg = $this->readMessage($left);
            if ($msg === null) {
                return null;
            }
            $this->events[] = $msg;
        }
    }

    /** Events not yet consumed (drains what has arrived so far). */
    public function pendingEvents(): array
    {
        while (($msg = $this->readMessage(0.0)) !== null) {
            $this->events[] = $msg;
        }
        $out = $this->events;
        $this->events = [];
        return $out;
    }

    /** Stop the proxy process (idempotent). */
    public function stop(): void
    {
        if (!is_resource($this->proc)) {
            return;
        }
        @fclose($this->stdin); // the proxy exits when its stdin closes
        $st = proc_get_status($this->proc);
        $deadline = microtime(true) + 2.0;
        while ($st['running'] && microtime(true) < $deadline) {
            usleep(5000);
            $st = proc_get_status($this->proc);
        }
        if ($st['running']) {
            exec('kill -KILL ' . (int) $this->pid . ' 2>/dev/null');
        }
        @fclose($this->stdout);
        proc_close($this->proc);
    }
}

/* ------------------------------------------------------------------ */

if (PHP_SAPI === 'cli' && isset($argv[0]) && realpath($argv[0]) === __FILE__) {
    exit(FaultProxyServer::main($argv));
}
