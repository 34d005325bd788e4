<?php
/*
 * A TCP proxy in front of one redis-server that can cut it off from its
 * sentinels and replicas while its clients still reach it: the network
 * partition of the failover matrix (testing/failover/matrix.php, cell
 * "sentinel partition").
 *
 *   php partition_proxy.php UPSTREAM_PORT
 *
 * Everyone reaches the master through this proxy: the sentinels monitor it at
 * the proxy's port, the replicas replicate from it, and the clients get that
 * address from the sentinels. Each connection is classified by what its client
 * sends (RESP, parsed command by command):
 *   - "internal" once it sends CLIENT SETNAME sentinel-... (how every Sentinel
 *     names its command and pub/sub links) or REPLCONF / PSYNC / SYNC (a
 *     replica's handshake: PING, REPLCONF listening-port, REPLCONF capa, PSYNC);
 *   - "client" otherwise (redis_lease's links, the test's own probes).
 * On "cut", internal connections become black holes: bytes are read and dropped
 * both ways, and a side that closes is not told to the other (as on a real
 * partition, where neither FIN nor RST gets through); new internal connections
 * are accepted and blackholed as soon as they identify themselves. Client
 * connections are forwarded throughout. On "heal", every blackholed connection
 * is closed (both ends: each peer reconnects and resynchronises) and
 * everything is forwarded again.
 *
 * Control: one command per line on stdin ("cut", "heal", "stats"); one JSON
 * line per answer on stdout; the first line is {"listening": PORT}. It exits
 * when stdin closes (its parent is gone).
 */

final class PpConn
{
    public string $toUp = '';
    public string $toDown = '';
    public string $parse = '';
    public ?string $kind = null; // null (undecided), 'internal', 'client'
    public bool $hole = false;
    public bool $downClosed = false;
    public bool $upClosed = false;

    public function __construct(public $down, public $up)
    {
    }
}

/** Offset just past one complete RESP value in $b at $p, or null when incomplete. */
function pp_end(string $b, int $p): ?int
{
    if ($p >= strlen($b)) {
        return null;
    }
    $nl = strpos($b, "\r\n", $p);
    if ($nl === false) {
        return null;
    }
    $t = $b[$p];
    $n = (int) substr($b, $p + 1, $nl - $p - 1);
    if ($t === '*') {
        $q = $nl + 2;
        for ($i = 0; $i < $n; $i++) {
            $q = pp_end($b, $q);
            if ($q === null) {
                return null;
            }
        }
        return $q;
    }
    if ($t === '$') {
        $end = $nl + 2 + max($n, 0) + ($n >= 0 ? 2 : 0);
        return $end <= strlen($b) ? $end : null;
    }
    return $nl + 2; // inline command or simple value
}

/** The words of the RESP command $raw (an array of bulk strings) or of an inline command. */
function pp_words(string $raw): array
{
    if ($raw === '' || $raw[0] !== '*') {
        return preg_split('/\s+/', trim($raw)) ?: [];
    }
    $words = [];
    $p = strpos($raw, "\r\n") + 2;
    while ($p < strlen($raw) && $raw[$p] === '$') {
        $nl = strpos($raw, "\r\n", $p);
        $len = (int) substr($raw, $p + 1, $nl - $p - 1);
        $words[] = substr($raw, $nl + 2, $len);
        $p = $nl + 2 + $len + 2;
    }
    return $words;
}

/** Classify $c from the commands its client sent so far (sets $c->kind once decided). */
function pp_classify(PpConn $c, string $bytes): void
{
    if ($c->kind !== null) {
        return;
    }
    $c->parse .= $bytes;
    while (($end = pp_end($c->parse, 0)) !== null) {
        $w = array_map('strval', pp_words(substr($c->parse, 0, $end)));
        $c->parse = substr($c->parse, $end);
        $cmd = strtoupper($w[0] ?? '');
        if (in_array($cmd, ['REPLCONF', 'PSYNC', 'SYNC'], true)
            || ($cmd === 'CLIENT' && strtoupper($w[1] ?? '') === 'SETNAME' && str_starts_with($w[2] ?? '', 'sentinel-'))) {
            $c->kind = 'internal';
        } elseif (!in_array($cmd, ['PING', 'AUTH', 'HELLO', 'CLIENT', 'SELECT', ''], true)) {
            // A data command: a client (a replica and a sentinel say who they are first).
            $c->kind = 'client';
        }
        if ($c->kind !== null) {
            $c->parse = '';
            return;
        }
    }
}

$upstream = (int) ($argv[1] ?? 0);
$server = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
if ($server === false || $upstream <= 0) {
    fwrite(STDOUT, json_encode(['error' => "cannot listen: $errstr"]) . "\n");
    exit(1);
}
stream_set_blocking($server, false);
stream_set_blocking(STDIN, false);
$port = (int) substr(strrchr(stream_socket_get_name($server, false), ':'), 1);
fwrite(STDOUT, json_encode(['listening' => $port]) . "\n");

$cut = false;
$conns = [];   // id => PpConn
$ctlBuf = '';
$stats = ['accepted' => 0, 'internal' => 0, 'client' => 0, 'blackholed' => 0, 'dropped_bytes' => 0];

$close = static function (PpConn $c) use (&$conns): void {
    foreach ([$c->down, $c->up] as $s) {
        if (is_resource($s)) {
            @fclose($s);
        }
    }
    unset($conns[spl_object_id($c)]);
};

while (true) {
    $r = [$server, STDIN];
    $w = [];
    foreach ($conns as $c) {
        if (!$c->downClosed) {
            $r[] = $c->down;
        }
        if (!$c->upClosed) {
            $r[] = $c->up;
        }
        if ($c->toUp !== '' && !$c->upClosed) {
            $w[] = $c->up;
        }
        if ($c->toDown !== '' && !$c->downClosed) {
            $w[] = $c->down;
        }
    }
    $e = null;
    if (@stream_select($r, $w, $e, 1) === false) {
        continue;
    }
    foreach ($r as $s) {
        if ($s === $server) {
            $down = @stream_socket_accept($server, 0);
            if ($down === false) {
                continue;
            }
            $up = @stream_socket_client("tcp://127.0.0.1:$upstream", $errno, $errstr, 1.0);
            if ($up === false) {
                fclose($down);
                continue;
            }
            stream_set_blocking($down, false);
            stream_set_blocking($up, false);
            $c = new PpConn($down, $up);
            $conns[spl_object_id($c)] = $c;
            $stats['accepted']++;
            continue;
        }
        if ($s === STDIN) {
            $chunk = fread(STDIN, 4096);
            if ($chunk === '' && feof(STDIN)) {
                exit(0);
            }
            $ctlBuf .= (string) $chunk;
            while (($nl = strpos($ctlBuf, "\n")) !== false) {
                $cmd = trim(substr($ctlBuf, 0, $nl));
                $ctlBuf = substr($ctlBuf, $nl + 1);
                if ($cmd === 'cut') {
                    $cut = true;
                    foreach ($conns as $c) {
                        if ($c->kind === 'internal') {
                            $c->hole = true;
                            $c->toUp = $c->toDown = '';
                            $stats['blackholed']++;
                        }
                    }
                } elseif ($cmd === 'heal') {
                    $cut = false;
                    foreach ($conns as $c) {
                        if ($c->hole) {
                            $close($c);
                        }
                    }
                }
                fwrite(STDOUT, json_encode(['done' => $cmd, 'cut' => $cut, 'hrtime' => hrtime(true)] + $stats) . "\n");
            }
            continue;
        }
        foreach ($conns as $c) {
            $fromDown = $s === $c->down;
            if (!$fromDown && $s !== $c->up) {
                continue;
            }
            $data = @fread($s, 65536);
            if ($data === false || ($data === '' && feof($s))) {
                if ($c->hole) {
                    // Not passed on: the other side hears nothing, as on a partition.
                    if ($fromDown) {
                        $c->downClosed = true;
                    } else {
                        $c->upClosed = true;
                    }
                    if ($c->downClosed && $c->upClosed) {
                        $close($c);
                    }
                } else {
                    $close($c);
                }
                break;
            }
            if ($fromDown) {
                $before = $c->kind;
                pp_classify($c, $data);
                if ($before === null && $c->kind !== null) {
                    $stats[$c->kind]++;
                    if ($cut && $c->kind === 'internal') {
                        $c->hole = true;
                        $stats['blackholed']++;
                    }
                }
            }
            if ($c->hole) {
                $stats['dropped_bytes'] += strlen($data);
            } elseif ($fromDown) {
                $c->toUp .= $data;
            } else {
                $c->toDown .= $data;
            }
            break;
        }
    }
    foreach ($w as $s) {
        foreach ($conns as $c) {
            if ($s === $c->up && $c->toUp !== '') {
                $n = @fwrite($s, $c->toUp);
                if ($n === false) {
                    $close($c);
                } else {
                    $c->toUp = substr($c->toUp, $n);
                }
                break;
            }
            if ($s === $c->down && $c->toDown !== '') {
                $n = @fwrite($s, $c->toDown);
                if ($n === false) {
                    $close($c);
                } else {
                    $c->toDown = substr($c->toDown, $n);
                }
                break;
            }
        }
    }
}
