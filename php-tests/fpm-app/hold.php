<?php
/*
 * A request that holds its session until told to go on: start session `sid`,
 * publish "<ctl>:started" (this worker's pid) in the control Redis, then
 * simulate work until "<ctl>:go" exists (at most go_timeout seconds), set
 * $_SESSION[key] = value (unless key is '') and save.
 *
 *   hold.php?mode=class|native&sid=ID&key=NAME&value=V&ctl=PREFIX&go_timeout=S
 *
 * The tests use it to keep a lock past its lease, or to be SIGKILLed while
 * holding it. Replies with JSON: started, went (go seen in time),
 * write_closed, session_before (the data read), warnings, times.
 */
require __DIR__ . '/common.inc';

$mode = app_param('mode', 'class');
$ctl = (string) app_param('ctl', 'ctl');
$start = app_session_start($mode, (string) app_param('sid', ''));
$before = $start['started'] ? $_SESSION : null;
// The test waits for this key before it goes on; the pid lets it kill us.
app_ctl()->cmd('SET', "$ctl:started", (string) getmypid());
$went = app_await_key("$ctl:go", (float) app_param('go_timeout', '10'));
$t_go = microtime(true);
$written = null;
if ($start['started']) {
    // key='' leaves the data unchanged: with session.lazy_write PHP then only
    // renews its ttl (updateTimestamp) instead of writing it.
    $key = (string) app_param('key', 'k');
    if ($key !== '') {
        $_SESSION[$key] = (string) app_param('value', '1');
    }
    $written = session_write_close();
}
app_reply($start + [
    'mode' => $mode,
    'session_before' => $before,
    'went' => $went,
    't_go' => $t_go,
    'write_closed' => $written,
]);
