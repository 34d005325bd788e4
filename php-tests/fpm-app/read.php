<?php
/*
 * Read session `sid` without keeping it locked (read_and_close) and reply
 * with its data as JSON.
 *
 *   read.php?mode=class|native&sid=ID
 */
require __DIR__ . '/common.inc';

$mode = app_param('mode', 'class');
$start = app_session_start($mode, (string) app_param('sid', ''), ['read_and_close' => true]);
app_reply($start + [
    'mode' => $mode,
    'data' => $start['started'] ? $_SESSION : null,
]);
