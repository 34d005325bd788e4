<?php
/*
 * A small FastCGI client for tests and demos, written from the FastCGI 1.0
 * specification (responder role only).
 *
 *   $c = new FcgiClient('unix:///tmp/fpm.sock');          // or 'tcp://127.0.0.1:9000'
 *   $r = $c->request(FcgiClient::params('/abs/app.php', ['a' => 1]));
 *   echo $r->status, $r->body;
 *
 *   // Many requests at once: one connection each, driven by stream_select().
 *   $rs = $c->multi(['x' => ['params' => $p1], 'y' => ['params' => $p2]], 30.0);
 *
 *   // Or start requests now and collect them later:
 *   $call = $c->begin($params);
 *   ...
 *   FcgiClient::await([$call], 10.0);
 *   $r = $call->response;
 *
 * Every wait is bounded: a request that has not ended by its deadline is cut
 * off and reported with $response->error set. One connection carries one
 * request (FCGI_KEEP_CONN is not set), which is what php-fpm expects from a
 * web server that does not multiplex.
 *
 * No dependency on the redis_lease extension or on run-tests.
 */

/** The outcome of one FastCGI request, with timings (microtime(true) values). */
final class FcgiResponse
{
    /** Transport problem (connect failed, connection closed early, timed out); null when the request ended normally. */
    public ?string $error = null;
    /** HTTP status from the "Status:" header; 200 when the application sent none; 0 when no headers arrived. */
    public int $status = 0;
    /** Response headers: lower-case name => list of values. */
    public array $headers = [];
    /** Body: everything after the header block. */
    public string $body = '';
    /** Raw FCGI_STDOUT stream (headers and body). */
    public string $stdout = '';
    /** FCGI_STDERR stream. */
    public string $stderr = '';
    /** From FCGI_END_REQUEST; null when it never came. */
    public ?int $appStatus = null;
    public ?int $protocolStatus = null;

    /** When the request was begun. */
    public float $started = 0.0;
    /** When the connection was found open (writable). */
    public ?float $connected = null;
    /** When the last byte of the request was written. */
    public ?float $sent = null;
    /** When the first byte of the reply arrived. */
    public ?float $firstByte = null;
    /** When the request ended (normally or not). */
    public ?float $finished = null;

    /** True when FCGI_END_REQUEST arrived with FCGI_REQUEST_COMPLETE. */
    public function ok(): bool
    {
        return $this->error === null && $this->protocolStatus === FcgiClient::REQUEST_COMPLETE;
    }

    /** Seconds from begin to end (or to now when not ended). */
    public function duration(): float
    {
        return ($this->finished ?? microtime(true)) - $this->started;
    }

    /** The first value of header $name, or null. */
    public function header(string $name): ?string
    {
        return $this->headers[strtolower($name)][0] ?? null;
    }

    /** The body decoded as JSON (arrays), or null if it is not JSON. */
    public function json(): mixed
    {
        $v = json_decode($this->body, true);
        return json_last_error() === JSON_ERROR_NONE ? $v : null;
    }

    /** A one-line description for failure messages. */
    public function describe(): string
    {
        $s = $this->error !== null ? "error: {$this->error}" : "status {$this->status}";
        $s .= sprintf(', %.3f s', $this->duration());
        if ($this->stderr !== '') {
            $s .= ', stderr: ' . substr(trim($this->stderr), 0, 300);
        }
        $s .= ', body: ' . substr(trim($this->body), 0, 300);
        return $s;
    }

    public function toArray(): array
    {
        return get_object_vars($this);
    }
}

/** One request in flight on its own connection. Drive it with FcgiClient::await(). */
final class FcgiCall
{
    /** @var resource|null */
    public $sock;
    public FcgiResponse $response;
    /** Bytes still to be written. */
    public string $out;
    /** Bytes read but not yet parsed into records. */
    public string $in = '';
    public bool $done = false;
    /** An HTTP request (FcgiClient for 'http://'): the reply is read until the server closes. */
    public bool $http = false;

    public function __construct($sock, string $out, FcgiResponse $response)
    {
        $this->sock = $sock;
        $this->out = $out;
        $this->response = $response;
    }

    /** End the call: close the socket; set $error unless the request ended normally. */
    public function finish(?string $error = null): void
    {
        if ($this->done) {
            return;
        }
        $this->done = true;
        if ($error !== null && $this->response->error === null) {
            $this->response->error = $error;
        }
        $this->response->finished = microtime(true);
        if (is_resource($this->sock)) {
            fclose($this->sock);
        }
        $this->sock = null;
        FcgiClient::parseStdout($this->response);
    }
}

final class FcgiClient
{
    // Record types (spec section 8).
    public const BEGIN_REQUEST = 1;
    public const ABORT_REQUEST = 2;
    public const END_REQUEST = 3;
    public const PARAMS = 4;
    public const STDIN = 5;
    public const STDOUT = 6;
    public const STDERR = 7;
    public const DATA = 8;
    public const GET_VALUES = 9;
    public const GET_VALUES_RESULT = 10;
    public const UNKNOWN_TYPE = 11;

    public const VERSION_1 = 1;
    public const RESPONDER = 1;
    /** protocolStatus values of FCGI_END_REQUEST. */
    public const REQUEST_COMPLETE = 0;
    public const CANT_MPX_CONN = 1;
    public const OVERLOADED = 2;
    public const UNKNOWN_ROLE = 3;

    /** Largest content of one record (contentLength is 16 bits); a multiple of 8. */
    private const MAX_CONTENT = 65528;
    /** The only request id we use: one request per connection. */
    private const REQUEST_ID = 1;

    /** CGI variables a web server makes itself (not sent in HTTP mode; any other param is sent as a header). */
    private const CGI = ['GATEWAY_INTERFACE', 'SERVER_SOFTWARE', 'SERVER_PROTOCOL', 'SERVER_NAME', 'SERVER_ADDR',
        'SERVER_PORT', 'REMOTE_ADDR', 'REMOTE_PORT', 'REQUEST_METHOD', 'SCRIPT_FILENAME', 'SCRIPT_NAME',
        'DOCUMENT_ROOT', 'REQUEST_URI', 'DOCUMENT_URI', 'QUERY_STRING', 'CONTENT_LENGTH', 'CONTENT_TYPE'];

    private string $address;
    private bool $http = false;

    /**
     * @param string $address 'unix:///path/to.sock', 'tcp://host:port', 'host:port' or '/path/to.sock';
     *   or 'http://host:port': the same requests as HTTP to a web server that runs PHP itself
     *   (ApachePool), whose answers come back as FcgiResponse objects. SCRIPT_FILENAME is then the
     *   URL's path, and every param that is no CGI variable (RL_DSN...) travels in a header
     *   X-Rl-Param-NAME (base64) that testing/apache_prepend.php puts back into $_SERVER.
     * @param float $connectTimeout seconds a connection may take to open
     */
    public function __construct(string $address, private float $connectTimeout = 5.0)
    {
        if (str_starts_with($address, 'http://')) {
            $this->http = true;
            $address = 'tcp://' . substr($address, 7);
        } elseif (str_starts_with($address, '/')) {
            $address = 'unix://' . $address;
        } elseif (!str_contains($address, '://')) {
            $address = 'tcp://' . $address;
        }
        $this->address = $address;
    }

    public function address(): string
    {
        return $this->address;
    }

    /**
     * The CGI parameters of a request for the script at absolute path $script.
     * $query becomes QUERY_STRING; $extra is merged last (custom params become
     * $_SERVER entries in PHP).
     */
    public static function params(string $script, array $query = [], array $extra = [],
                                  string $method = 'GET', int $contentLength = 0): array
    {
        $qs = http_build_query($query);
        $uri = '/' . basename($script);
        $p = [
            'GATEWAY_INTERFACE' => 'CGI/1.1',
            'SERVER_SOFTWARE' => 'redis-lease-fcgi-client',
            'SERVER_PROTOCOL' => 'HTTP/1.1',
            'SERVER_NAME' => 'localhost',
            'SERVER_ADDR' => '127.0.0.1',
            'SERVER_PORT' => '80',
            'REMOTE_ADDR' => '127.0.0.1',
            'REMOTE_PORT' => '50000',
            'REQUEST_METHOD' => $method,
            'SCRIPT_FILENAME' => $script,
            'SCRIPT_NAME' => $uri,
            'DOCUMENT_ROOT' => dirname($script),
            'REQUEST_URI' => $uri . ($qs !== '' ? '?' . $qs : ''),
            'DOCUMENT_URI' => $uri,
            'QUERY_STRING' => $qs,
            'CONTENT_LENGTH' => (string) $contentLength,
            'CONTENT_TYPE' => $contentLength > 0 ? 'application/x-www-form-urlencoded' : '',
        ];
        foreach ($extra as $k => $v) {
            $p[$k] = (string) $v;
        }
        return $p;
    }

    /* -------------------------------------------------------------- */
    /* Encoding (spec sections 3.3 and 3.4) */

    /** One record: 8-byte header, content, padding to a multiple of 8. */
    public static function record(int $type, string $content, int $requestId = self::REQUEST_ID): string
    {
        $len = strlen($content);
        if ($len > 0xFFFF) {
            throw new LengthException("FastCGI record content too long: $len bytes");
        }
        $pad = (8 - $len % 8) % 8;
        // version, type, requestId (16 bit BE), contentLength (16 bit BE), paddingLength, reserved
        return pack('CCnnCC', self::VERSION_1, $type, $requestId, $len, $pad, 0)
            . $content . str_repeat("\0", $pad);
    }

    /** A stream (PARAMS, STDIN) as records of at most MAX_CONTENT bytes, ended by an empty record. */
    public static function stream(int $type, string $data, int $requestId = self::REQUEST_ID): string
    {
        $out = '';
        for ($i = 0; $i < strlen($data); $i += self::MAX_CONTENT) {
            $out .= self::record($type, substr($data, $i, self::MAX_CONTENT), $requestId);
        }
        return $out . self::record($type, '', $requestId);
    }

    /** Name-value pair lengths: 1 byte below 128, else 4 bytes with the top bit set. */
    private static function nvLength(int $n): string
    {
        return $n < 128 ? chr($n) : pack('N', $n | 0x80000000);
    }

    public static function encodeParams(array $params): string
    {
        $out = '';
        foreach ($params as $name => $value) {
            $name = (string) $name;
            $value = (string) $value;
            $out .= self::nvLength(strlen($name)) . self::nvLength(strlen($value)) . $name . $value;
        }
        return $out;
    }

    /**
     * The PARAMS stream. The spec lets a name-value pair span records, but
     * php-fpm parses each record on its own, so pairs are packed whole into
     * records; only a pair longer than one record is split.
     */
    public static function paramsStream(array $params, int $requestId = self::REQUEST_ID): string
    {
        $out = '';
        $chunk = '';
        foreach ($params as $name => $value) {
            $pair = self::encodeParams([$name => $value]);
            if ($chunk !== '' && strlen($chunk) + strlen($pair) > self::MAX_CONTENT) {
                $out .= self::record(self::PARAMS, $chunk, $requestId);
                $chunk = '';
            }
            $chunk .= $pair;
            while (strlen($chunk) > self::MAX_CONTENT) {
                $out .= self::record(self::PARAMS, substr($chunk, 0, self::MAX_CONTENT), $requestId);
                $chunk = substr($chunk, self::MAX_CONTENT);
            }
        }
        if ($chunk !== '') {
            $out .= self::record(self::PARAMS, $chunk, $requestId);
        }
        return $out . self::record(self::PARAMS, '', $requestId);
    }

    /** The bytes of a whole request: BEGIN_REQUEST, PARAMS stream, STDIN stream. */
    public static function encodeRequest(array $params, string $stdin = ''): string
    {
        // role (16 bit BE), flags (0: close the connection after the request), 5 reserved bytes
        $begin = pack('nC', self::RESPONDER, 0) . str_repeat("\0", 5);
        return self::record(self::BEGIN_REQUEST, $begin)
            . self::paramsStream($params)
            . self::stream(self::STDIN, $stdin);
    }

    /* -------------------------------------------------------------- */
    /* Requests */

    /** Open a connection and queue the request; nothing blocks here beyond a local connect. */
    public function begin(array $params, string $stdin = ''): FcgiCall
    {
        $resp = new FcgiResponse();
        $resp->started = microtime(true);
        if (!isset($params['CONTENT_LENGTH']) || ($stdin !== '' && (int) $params['CONTENT_LENGTH'] !== strlen($stdin))) {
            $params['CONTENT_LENGTH'] = (string) strlen($stdin);
        }
        $call = new FcgiCall(null, $this->http ? self::encodeHttp($params, $stdin) : self::encodeRequest($params, $stdin), $resp);
        $call->http = $this->http;
        $sock = @stream_socket_client($this->address, $errno, $errstr, $this->connectTimeout,
            STREAM_CLIENT_CONNECT | STREAM_CLIENT_ASYNC_CONNECT);
        if ($sock === false) {
            $call->finish("connect to {$this->address} failed: [$errno] $errstr");
            return $call;
        }
        stream_set_blocking($sock, false);
        // No PHP-level write buffering: fwrite() hands bytes straight to the socket.
        stream_set_write_buffer($sock, 0);
        stream_set_read_buffer($sock, 0);
        $call->sock = $sock;
        return $call;
    }

    /**
     * Drive $calls until all have ended or $timeout seconds have passed; calls
     * still running then are cut off with error "timed out". Returns true when
     * all ended by themselves.
     *
     * @param FcgiCall[] $calls
     */
    public static function await(array $calls, float $timeout): bool
    {
        return self::drive($calls, $timeout, true);
    }

    /**
     * Drive $calls for at most $seconds without cutting anything off: for
     * keeping requests moving while the caller waits for something else.
     * Returns true when all have ended.
     *
     * @param FcgiCall[] $calls
     */
    public static function pump(array $calls, float $seconds): bool
    {
        return self::drive($calls, $seconds, false);
    }

    private static function drive(array $calls, float $timeout, bool $cutOff): bool
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            $read = $write = [];
            $byId = [];
            foreach ($calls as $call) {
                if ($call->done) {
                    continue;
                }
                $id = (int) $call->sock;
                $byId[$id] = $call;
                $read[] = $call->sock;
                if ($call->out !== '') {
                    $write[] = $call->sock;
                }
            }
            if ($byId === []) {
                return true;
            }
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                if ($cutOff) {
                    foreach ($byId as $call) {
                        $call->finish(sprintf('timed out after %.3f s', $timeout));
                    }
                }
                return false;
            }
            $except = null;
            $n = @stream_select($read, $write, $except, (int) $left, (int) (fmod($left, 1.0) * 1e6));
            if ($n === false) {
                // Interrupted by a signal: just try again (the deadline still holds).
                continue;
            }
            foreach ($write as $s) {
                self::onWritable($byId[(int) $s]);
            }
            foreach ($read as $s) {
                $call = $byId[(int) $s];
                if (!$call->done) {
                    self::onReadable($call);
                }
            }
        }
    }

    private static function onWritable(FcgiCall $call): void
    {
        $r = $call->response;
        $r->connected ??= microtime(true);
        $n = @fwrite($call->sock, $call->out);
        if ($n === false) {
            $call->finish('write failed (connection refused or closed)');
            return;
        }
        $call->out = (string) substr($call->out, $n);
        if ($call->out === '') {
            $r->sent = microtime(true);
        }
    }

    /** An HTTP/1.0 request for FastCGI params (see the constructor). */
    public static function encodeHttp(array $params, string $stdin = ''): string
    {
        $query = $params['QUERY_STRING'] ?? '';
        $head = ($params['REQUEST_METHOD'] ?? 'GET') . ' '
            . str_replace('%2F', '/', rawurlencode($params['SCRIPT_FILENAME'] ?? '/'))
            . ($query !== '' ? "?$query" : '') . " HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n";
        foreach ($params as $name => $value) {
            if (!in_array($name, self::CGI, true)) {
                $head .= 'X-Rl-Param-' . str_replace('_', '-', $name) . ': ' . base64_encode((string) $value) . "\r\n";
            }
        }
        if ($stdin !== '') {
            $head .= 'Content-Type: ' . (($params['CONTENT_TYPE'] ?? '') ?: 'application/x-www-form-urlencoded') . "\r\n"
                . 'Content-Length: ' . strlen($stdin) . "\r\n";
        }
        return $head . "\r\n" . $stdin;
    }

    /** The server closed an HTTP call's connection: its reply, as a CGI response ("Status:"). */
    private static function endHttp(FcgiCall $call): void
    {
        $r = $call->response;
        if (!preg_match('~^HTTP/1\.[01] (\d{3})[^\r\n]*\r\n~', $call->in, $m) || !str_contains($call->in, "\r\n\r\n")) {
            $r->stdout = $call->in;
            $call->finish($r->connected === null ? 'connection failed' : 'no whole HTTP response (' . strlen($call->in) . ' bytes)');
            return;
        }
        $r->stdout = "Status: {$m[1]}\r\n" . substr($call->in, strlen($m[0]));
        $r->appStatus = 0;
        $r->protocolStatus = self::REQUEST_COMPLETE;
        $call->finish();
    }

    private static function onReadable(FcgiCall $call): void
    {
        $r = $call->response;
        $chunk = @fread($call->sock, 65536);
        if ($chunk === false || $chunk === '') {
            if ($call->http && feof($call->sock)) {
                self::endHttp($call);
            } elseif (feof($call->sock) || $chunk === false) {
                $call->finish($r->connected === null
                    ? 'connection failed'
                    : 'connection closed before FCGI_END_REQUEST');
            }
            return;
        }
        $r->connected ??= microtime(true);
        $r->firstByte ??= microtime(true);
        $call->in .= $chunk;
        if (!$call->http) {
            self::parseRecords($call);
        }
    }

    /** Consume every complete record in $call->in. */
    private static function parseRecords(FcgiCall $call): void
    {
        $r = $call->response;
        while (strlen($call->in) >= 8) {
            $h = unpack('Cversion/Ctype/nid/nlen/Cpad/Creserved', $call->in);
            $total = 8 + $h['len'] + $h['pad'];
            if (strlen($call->in) < $total) {
                return; // wait for the rest of this record
            }
            $content = substr($call->in, 8, $h['len']);
            $call->in = (string) substr($call->in, $total);
            if ($h['version'] !== self::VERSION_1) {
                $call->finish("unexpected FastCGI version {$h['version']}");
                return;
            }
            if ($h['id'] !== self::REQUEST_ID) {
                continue; // a management record (id 0) or not ours: nothing to do with it
            }
            switch ($h['type']) {
                case self::STDOUT:
                    $r->stdout .= $content;
                    break;
                case self::STDERR:
                    $r->stderr .= $content;
                    break;
                case self::END_REQUEST:
                    $end = unpack('NappStatus/CprotocolStatus', $content);
                    $r->appStatus = $end['appStatus'];
                    $r->protocolStatus = $end['protocolStatus'];
                    $call->finish($r->protocolStatus === self::REQUEST_COMPLETE
                        ? null
                        : "request not completed: protocolStatus {$r->protocolStatus}");
                    return;
                default:
                    // GET_VALUES_RESULT, UNKNOWN_TYPE: not expected on a responder connection.
                    break;
            }
        }
    }

    /** Split stdout into headers and body (CGI response, RFC 3875 section 6). */
    public static function parseStdout(FcgiResponse $r): void
    {
        $raw = $r->stdout;
        $pos = strpos($raw, "\r\n\r\n");
        $sepLen = 4;
        $lf = strpos($raw, "\n\n");
        if ($lf !== false && ($pos === false || $lf < $pos)) {
            $pos = $lf;
            $sepLen = 2;
        }
        if ($pos === false) {
            // No complete header block: everything is body (or nothing came).
            $r->body = $raw;
            $r->status = $raw === '' ? 0 : 200;
            return;
        }
        $r->headers = [];
        $r->status = 200;
        foreach (preg_split('/\r?\n/', substr($raw, 0, $pos)) as $line) {
            $colon = strpos($line, ':');
            if ($colon === false) {
                continue;
            }
            $name = strtolower(trim(substr($line, 0, $colon)));
            $value = trim(substr($line, $colon + 1));
            $r->headers[$name][] = $value;
            if ($name === 'status' && preg_match('/^(\d{3})/', $value, $m)) {
                $r->status = (int) $m[1];
            }
        }
        $r->body = (string) substr($raw, $pos + $sepLen);
    }

    /** One request, waited for at most $timeout seconds. */
    public function request(array $params, string $stdin = '', float $timeout = 10.0): FcgiResponse
    {
        $call = $this->begin($params, $stdin);
        self::await([$call], $timeout);
        return $call->response;
    }

    /**
     * Run many requests concurrently, one connection each, and wait for all of
     * them at most $timeout seconds in total.
     *
     * @param array $requests key => ['params' => array, 'stdin' => string (optional)]
     * @return FcgiResponse[] same keys as $requests
     */
    public function multi(array $requests, float $timeout = 30.0): array
    {
        $calls = [];
        foreach ($requests as $key => $req) {
            $calls[$key] = $this->begin($req['params'], $req['stdin'] ?? '');
        }
        self::await($calls, $timeout);
        return array_map(static fn(FcgiCall $c) => $c->response, $calls);
    }
}
