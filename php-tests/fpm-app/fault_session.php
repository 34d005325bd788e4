<?php
/*
 * One session request of the fault tests: start session `sid`, add
 * $_SESSION[key] = 1, save, and say whether the save was acknowledged.
 *
 *   fault_session.php?mode=class|native&sid=ID&key=NAME
 *
 * PHP 8.2's session_write_close() returns true even when the save handler
 * refused the write, so a write counts as acknowledged only when the session
 * started, session_write_close() returned true and no warning was raised
 * while writing. Replies with JSON: started, acked, keys (count after adding
 * ours), write_warnings, warnings, times.
 */
require __DIR__ . '/common.inc';

$mode = app_param('mode', 'class');
$start = app_session_start($mode, (string) app_param('sid', ''));
$acked = false;
$keys = null;
$closed = null;
$writeWarnings = [];
if ($start['started']) {
    $_SESSION[(string) app_param('key', 'k')] = 1;
    $keys = count($_SESSION);
    $before = count($GLOBALS['app_warnings']);
    $closed = session_write_close();
    $writeWarnings = array_slice(app_warning_messages(), $before);
    $acked = $closed === true && $writeWarnings === [];
}
app_reply($start + [
    'mode' => $mode,
    'acked' => $acked,
    'keys' => $keys,
    'write_closed' => $closed,
    'write_warnings' => $writeWarnings,
]);
