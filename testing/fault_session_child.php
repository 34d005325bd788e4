<?php
/*
 * The child side of fault_session_child() (testing/fault_helpers.php): a CLI
 * PHP process that uses one form of the redis_lease session handler and does
 * one session step per JSON line it reads on stdin, answering each with one
 * JSON line on stdout. Run through st_child(), which has already loaded
 * php-tests/fpm-app/common.inc (warnings are captured) and set $mode.
 *
 * Steps ({"op": ..., ...}):
 *   start    {"sid": ID, "options": {...}}  session_id(ID); session_start(options)
 *            -> started, took, data ($_SESSION when started), readonly (opened read-only)
 *   set      {"values": {k: v}}             $_SESSION[k] = v
 *   write                                   session_write_close() -> closed, took
 *   abort                                   session_abort() -> aborted
 *   destroy                                 session_destroy() -> destroyed
 *   reset                                   session_reset() -> reset, data
 *   regenerate {"delete": bool}             session_regenerate_id(delete, default true) -> regenerated, id
 *   metrics                                 -> counters (RedisLease\metrics() of this process)
 *   exit
 * Every answer also carries the warnings raised since the previous answer.
 */

/** A user-land handler that hands every call on, as Symfony's SessionHandlerProxy does. */
final class ChildHandlerProxy implements SessionHandlerInterface, SessionUpdateTimestampHandlerInterface
{
    public function __construct(private RedisLockingSessionHandler $inner) {}
    public function open(string $path, string $name): bool { return $this->inner->open($path, $name); }
    public function close(): bool { return $this->inner->close(); }
    public function read(string $id): string|false { return $this->inner->read($id); }
    public function write(string $id, string $data): bool { return $this->inner->write($id, $data); }
    public function destroy(string $id): bool { return $this->inner->destroy($id); }
    public function gc(int $max): int|false { return $this->inner->gc($max); }
    public function validateId(string $id): bool { return $this->inner->validateId($id); }
    public function updateTimestamp(string $id, string $data): bool { return $this->inner->updateTimestamp($id, $data); }
}

if ($mode === 'class') {
    $handler = new RedisLockingSessionHandler($_SERVER['RL_DSN'], json_decode($_SERVER['RL_OPTIONS'], true));
    // RL_PROXY in the environment: behind a user-land proxy.
    session_set_save_handler(getenv('RL_PROXY') ? new ChildHandlerProxy($handler) : $handler, true);
}

function child_reply(array $fields): void
{
    // fwrite(STDOUT), not echo: output through PHP counts as "headers sent",
    // after which session_start() refuses to run.
    fwrite(STDOUT, json_encode($fields + ['warnings' => app_warning_messages()],
        JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR) . "\n");
    $GLOBALS['app_warnings'] = [];
}

while (($line = fgets(STDIN)) !== false) {
    $step = json_decode($line, true) ?? ['op' => 'invalid'];
    $t = microtime(true);
    switch ($step['op']) {
        case 'start':
            session_id($step['sid']);
            $ok = session_start($step['options'] ?? []);
            $readonly = $mode === 'class' ? $handler->isReadOnly() : RedisLease\session_is_readonly();
            child_reply(['started' => $ok, 'took' => microtime(true) - $t, 'data' => $ok ? $_SESSION : null, 'readonly' => $readonly]);
            break;
        case 'set':
            foreach ($step['values'] as $k => $v) {
                $_SESSION[$k] = $v;
            }
            child_reply(['set' => true]);
            break;
        case 'write':
            $ok = session_write_close();
            child_reply(['closed' => $ok, 'took' => microtime(true) - $t]);
            break;
        case 'abort':
            child_reply(['aborted' => session_abort(), 'took' => microtime(true) - $t]);
            break;
        case 'destroy':
            child_reply(['destroyed' => session_destroy(), 'took' => microtime(true) - $t]);
            break;
        case 'reset':
            child_reply(['reset' => session_reset(), 'data' => $_SESSION]);
            break;
        case 'regenerate':
            child_reply(['regenerated' => session_regenerate_id($step['delete'] ?? true), 'id' => session_id()]);
            break;
        case 'metrics':
            child_reply(['counters' => array_filter(RedisLease\metrics(), 'is_int')]);
            break;
        case 'exit':
            exit(0);
        default:
            child_reply(['error' => 'unknown step ' . $line]);
    }
}
