<?php
/*
 * One request of a session race: start session `sid`, note how many keys it
 * already has, simulate `work_ms` of work, add $_SESSION[key] = 1, save.
 *
 *   add_key.php?mode=class|native&sid=ID&key=NAME&work_ms=N
 *
 * Replies with JSON: started, count_before, write_closed, warnings, times.
 */
require __DIR__ . '/common.inc';

$mode = app_param('mode', 'class');
$start = app_session_start($mode, (string) app_param('sid', ''));
$countBefore = null;
$written = null;
if ($start['started']) {
    $countBefore = count($_SESSION);
    $work = (int) app_param('work_ms', '0');
    if ($work > 0) {
        usleep($work * 1000);
    }
    $_SESSION[(string) app_param('key', 'k')] = 1;
    $written = session_write_close();
}
app_reply($start + [
    'mode' => $mode,
    'count_before' => $countBefore,
    'write_closed' => $written,
]);
