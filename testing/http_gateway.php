<?php
/*
 * The smallest HTTP front for a php-fpm pool, so that Prometheus can scrape it:
 * every GET, whatever its path, runs one PHP script of the pool over FastCGI and
 * answers with its body and Content-Type. One request at a time; test use only.
 *
 *   php testing/http_gateway.php PORT FPM_ADDRESS SCRIPT [SERVER_PARAMS_JSON]
 *
 * Prints "listening" once it accepts connections.
 */
require __DIR__ . '/fcgi_client.php';

[, $port, $fpm, $script] = $argv;
$server = json_decode($argv[4] ?? '{}', true);
$listener = stream_socket_server("tcp://127.0.0.1:$port", $errno, $errstr);
if ($listener === false) {
    fwrite(STDERR, "http_gateway: cannot listen on $port: $errstr\n");
    exit(1);
}
echo "listening\n";
$client = new FcgiClient($fpm);
while (true) {
    $conn = @stream_socket_accept($listener, -1);
    if ($conn === false) {
        continue;
    }
    stream_set_timeout($conn, 5);
    $head = '';
    while (!str_contains($head, "\r\n\r\n") && ($line = fgets($conn)) !== false) {
        $head .= $line;
    }
    $r = $client->request(FcgiClient::params($script, [], $server), '', 10.0);
    $status = $r->ok() ? $r->status : 502;
    $type = $r->header('content-type') ?? 'text/plain';
    $body = $r->ok() ? $r->body : "gateway: {$r->describe()}\n";
    fwrite($conn, "HTTP/1.1 $status X\r\nContent-Type: $type\r\nContent-Length: " . strlen($body)
        . "\r\nConnection: close\r\n\r\n" . $body);
    fclose($conn);
}
