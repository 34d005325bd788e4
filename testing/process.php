<?php
/*
 * Process helpers of the private servers (FpmPool, ApachePool): a temp
 * directory, the children of a process, and a watchdog that ends a server's
 * process group once the process that started it is gone.
 */

/** A new private directory under the system's temp directory. */
function rl_temp_dir(string $prefix): string
{
    for ($i = 0; $i < 10; $i++) {
        $d = sys_get_temp_dir() . "/$prefix-" . bin2hex(random_bytes(4));
        if (@mkdir($d, 0700)) {
            return $d;
        }
    }
    throw new RuntimeException('cannot create a temp directory');
}

/** Removes $dir and everything in it. */
function rl_remove_tree(string $dir): void
{
    foreach (glob($dir . '/{,.}[!.]*', GLOB_BRACE) ?: [] as $f) {
        is_dir($f) && !is_link($f) ? rl_remove_tree($f) : @unlink($f);
    }
    @rmdir($dir);
}

/**
 * Live children (not zombies) of process $parent, sorted. Read from /proc, so
 * it also works while they are all busy.
 *
 * @return int[]
 */
function rl_child_pids(int $parent): array
{
    $pids = [];
    foreach (glob('/proc/[0-9]*/stat') ?: [] as $statFile) {
        $stat = @file_get_contents($statFile);
        if ($stat === false) {
            continue; // exited meanwhile
        }
        // "pid (comm) state ppid ...": comm may contain spaces and ')'.
        $close = strrpos($stat, ')');
        $fields = explode(' ', substr($stat, $close + 2));
        if ((int) ($fields[1] ?? 0) === $parent && ($fields[0] ?? 'Z') !== 'Z') {
            $pids[] = (int) $stat;
        }
    }
    sort($pids);
    return $pids;
}

/**
 * A shell loop that kills process group $group (and removes $dir) once process
 * $owner is gone; it ends by itself when the group is gone. Returns
 * [process resource, pid] (the resource is null when it could not start).
 */
function rl_group_watchdog(int $owner, int $group, string $dir): array
{
    // (dash's kill takes no "--"; a negative pid names a process group. A
    // zombie owner, not yet reaped by its parent, counts as gone. Until the
    // server has called setsid() its group does not exist yet, so it counts as
    // gone only when neither the group nor its first pid exists.)
    $quoted = escapeshellarg($dir);
    $script = "alive() { s=\$(sed -n 's/^State:[[:space:]]*\\(.\\).*/\\1/p' /proc/\$1/status 2>/dev/null); "
        . "[ -n \"\$s\" ] && [ \"\$s\" != Z ]; }; "
        . "while alive $owner; do "
        . "if ! kill -0 -$group 2>/dev/null && ! kill -0 $group 2>/dev/null; then exit 0; fi; "
        . "sleep 0.2; done; "
        . "kill -KILL -$group 2>/dev/null; kill -KILL $group 2>/dev/null; sleep 0.2; rm -rf $quoted; exit 0";
    $proc = proc_open(['sh', '-c', $script], [
        0 => ['file', '/dev/null', 'r'],
        1 => ['file', '/dev/null', 'w'],
        2 => ['file', '/dev/null', 'w'],
    ], $pipes);
    return is_resource($proc) ? [$proc, proc_get_status($proc)['pid']] : [null, 0];
}

/** The non-empty files $names of $dir, each under a "[name]" line (for failure messages). */
function rl_read_logs(string $dir, array $names): string
{
    $out = '';
    foreach ($names as $f) {
        $text = @file_get_contents("$dir/$f");
        if ($text !== false && $text !== '') {
            $out .= "[$f]\n" . $text;
        }
    }
    return $out;
}
