<?php
// A private redis-server for the demo and benchmarks: free port, no persistence.

function demo_start_redis(): array
{
    $probe = stream_socket_server('tcp://127.0.0.1:0');
    $port = (int) substr(strrchr(stream_socket_get_name($probe, false), ':'), 1);
    fclose($probe);
    $dir = sys_get_temp_dir() . "/redis_lease_demo_$port";
    @mkdir($dir);
    $proc = proc_open(
        ['redis-server', '--port', (string) $port, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', $dir],
        [1 => ['file', "$dir/redis.log", 'a'], 2 => ['file', "$dir/redis.log", 'a']],
        $pipes
    );
    $deadline = microtime(true) + 10;
    while (true) {
        $s = @stream_socket_client("tcp://127.0.0.1:$port", $errno, $errstr, 0.2);
        if ($s) {
            fwrite($s, "PING\r\n");
            if (fgets($s) === "+PONG\r\n") {
                fclose($s);
                break;
            }
            fclose($s);
        }
        if (microtime(true) > $deadline) {
            throw new RuntimeException("redis-server did not start; see $dir/redis.log");
        }
        usleep(5000);
    }
    register_shutdown_function(function () use ($proc, $dir) {
        proc_terminate($proc);
        proc_close($proc);
        array_map('unlink', glob("$dir/*") ?: []);
        @rmdir($dir);
    });
    return ['port' => $port, 'dsn' => "redis://127.0.0.1:$port"];
}
