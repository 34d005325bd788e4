<?php
/*
 * Watches a topology for the failover matrix and prints each event as one JSON
 * line {"t": hrtime(true) when seen, "src": port, "ev": name, "data": ...}.
 * hrtime is CLOCK_MONOTONIC: comparable with the php-fpm workers' and the
 * runner's timestamps on this machine.
 *
 *   php watcher.php sentinel PORT,PORT,...   PSUBSCRIBE * on every sentinel: every
 *       Sentinel event (+sdown, +odown, +failover-state-wait-promotion,
 *       +promoted-slave, +switch-master...), as it arrives. A {"ev": "subscribed"}
 *       line per sentinel comes first.
 *   php watcher.php cluster PORT,PORT,...    ROLE of each node every 5 ms: an
 *       event "role" whenever a node's role changes (the first one included).
 *
 * It exits when stdin closes (its parent is gone).
 */
require_once __DIR__ . '/../../php-tests/inc/redis.inc';

[, $mode, $list] = $argv + [null, '', ''];
$ports = array_map('intval', array_filter(explode(',', $list)));
stream_set_blocking(STDIN, false);

function emit(int $src, string $ev, mixed $data = null): void
{
    fwrite(STDOUT, json_encode(['t' => hrtime(true), 'src' => $src, 'ev' => $ev, 'data' => $data]) . "\n");
}

function stdin_closed(): bool
{
    $c = fread(STDIN, 4096);
    return $c === '' && feof(STDIN);
}

/** Reads one RESP value from $buf at $pos (advancing it), or null when incomplete. */
function resp_value(string $buf, int &$pos): mixed
{
    $nl = strpos($buf, "\r\n", $pos);
    if ($nl === false) {
        return null;
    }
    $t = $buf[$pos];
    $line = substr($buf, $pos + 1, $nl - $pos - 1);
    $p = $nl + 2;
    switch ($t) {
        case '+':
        case '-':
            $pos = $p;
            return $line;
        case ':':
            $pos = $p;
            return (int) $line;
        case '$':
            $n = (int) $line;
            if ($n < 0) {
                $pos = $p;
                return '';
            }
            if (strlen($buf) < $p + $n + 2) {
                return null;
            }
            $pos = $p + $n + 2;
            return substr($buf, $p, $n);
        case '*':
            $out = [];
            for ($i = 0; $i < (int) $line; $i++) {
                $v = resp_value($buf, $p);
                if ($v === null) {
                    return null;
                }
                $out[] = $v;
            }
            $pos = $p;
            return $out;
    }
    throw new RuntimeException("bad RESP type $t");
}

if ($mode === 'sentinel') {
    $socks = [];
    $bufs = [];
    foreach ($ports as $port) {
        $s = @stream_socket_client("tcp://127.0.0.1:$port", $errno, $errstr, 2.0);
        if ($s === false) {
            emit($port, 'error', "connect: $errstr");
            exit(1);
        }
        fwrite($s, "*2\r\n\$10\r\nPSUBSCRIBE\r\n\$1\r\n*\r\n");
        stream_set_blocking($s, false);
        $socks[$port] = $s;
        $bufs[$port] = '';
    }
    while (true) {
        $r = array_values($socks);
        $r[] = STDIN;
        $w = $e = null;
        if (@stream_select($r, $w, $e, 1) === false) {
            continue;
        }
        foreach ($r as $s) {
            if ($s === STDIN) {
                if (stdin_closed()) {
                    exit(0);
                }
                continue;
            }
            $port = array_search($s, $socks, true);
            $chunk = fread($s, 65536);
            if ($chunk === '' && feof($s)) {
                emit($port, 'closed');
                unset($socks[$port]);
                continue;
            }
            $now = hrtime(true);
            $bufs[$port] .= $chunk;
            $pos = 0;
            while ($pos < strlen($bufs[$port]) && ($v = resp_value($bufs[$port], $pos)) !== null) {
                if (is_array($v) && ($v[0] ?? '') === 'psubscribe') {
                    emit($port, 'subscribed');
                } elseif (is_array($v) && ($v[0] ?? '') === 'pmessage') {
                    fwrite(STDOUT, json_encode(['t' => $now, 'src' => $port, 'ev' => $v[2], 'data' => $v[3]]) . "\n");
                }
            }
            $bufs[$port] = substr($bufs[$port], $pos);
        }
        if ($socks === []) {
            exit(0);
        }
    }
}

if ($mode === 'cluster') {
    $role = [];
    $raws = [];
    while (!stdin_closed()) {
        foreach ($ports as $port) {
            try {
                $raws[$port] ??= new RlRaw($port, 0.2);
                $r = $raws[$port]->cmd('ROLE');
                $now = is_array($r) ? (string) $r[0] : '?';
            } catch (Throwable) {
                $raws[$port] = null;
                $now = 'unreachable';
            }
            if (($role[$port] ?? null) !== $now) {
                $role[$port] = $now;
                emit($port, 'role', $now);
            }
        }
        usleep(5000);
    }
    exit(0);
}
fwrite(STDERR, "usage: watcher.php sentinel|cluster PORT,...\n");
exit(2);
