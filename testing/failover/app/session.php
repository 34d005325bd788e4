<?php
/*
 * A session request of the failover matrix: read session `sid`, append this
 * request's id `rid` to the list $_SESSION['ids'], write it back, and say
 * whether the write was acknowledged. Replies with one JSON object of hrtime(true)
 * timestamps (CLOCK_MONOTONIC, comparable across processes of this machine).
 *
 *   session.php?mode=class|native&sid=ID&rid=N[&logout=1][&plant=ack_unwritten|logout_undone]
 *   FastCGI params: RL_DSN (the DSN), RL_OPTIONS (JSON of the session options)
 *
 * Every request says which ids it read ('read'). logout=1: a logout instead:
 * read the session, destroy it (session_destroy()) and say whether that was
 * acknowledged: the handler's destroy() returned true (class form),
 * session_destroy() returned true with no "Session object destruction failed"
 * warning (native form); and whether its lease may have been lost first
 * ('revoking': it then revoked whoever held, deleting what was there then;
 * counted as lost). A write says
 * whether a logout had revoked it ('revoked': refused, yet answered true).
 *
 * Acknowledged means what the save handler told PHP:
 *  - class form: the return value of RedisLockingSessionHandler::write(), seen
 *    through a wrapper that passes every call on unchanged and keeps write()'s
 *    result (the class is final, so it cannot be extended);
 *  - native form: PHP 8.2's session_write_close() returns true even when the
 *    handler's write failed, but PHP's session module raises its own warning
 *    "Failed to write session data (redis_lease)..." exactly when the module's
 *    write callback returned FAILURE (php_session_save_current_state). So a
 *    native write is acknowledged when session_write_close() returned true and
 *    no "Failed to write session data" warning was raised during it (every
 *    warning is recorded, ours included, for the report).
 *
 * plant=ack_unwritten (only for showing that the checker catches a broken app):
 * one request in 10 (of either pool: rid = 2 × its number + wait_replicas)
 * discards its change (session_abort()) and
 * still reports it acknowledged. plant=logout_undone: the logouts of every
 * second block of 40 request numbers (rid / 2) do so: about half of them, of
 * both forms.
 */

$t0 = hrtime(true);
$warnings = [];
set_error_handler(static function (int $level, string $message) use (&$warnings): bool {
    $warnings[] = $message;
    return true;
});

final class RecordingHandler implements SessionHandlerInterface, SessionIdInterface, SessionUpdateTimestampHandlerInterface
{
    public ?bool $writeResult = null;
    public int $writes = 0;

    public function __construct(private RedisLockingSessionHandler $inner)
    {
    }

    public function open(string $path, string $name): bool
    {
        return $this->inner->open($path, $name);
    }

    public function close(): bool
    {
        return $this->inner->close();
    }

    public function read(string $id): string|false
    {
        return $this->inner->read($id);
    }

    public function write(string $id, string $data): bool
    {
        $this->writes++;
        return $this->writeResult = $this->inner->write($id, $data);
    }

    public ?bool $destroyResult = null;

    public function destroy(string $id): bool
    {
        return $this->destroyResult = $this->inner->destroy($id);
    }

    public function gc(int $max_lifetime): int|false
    {
        return $this->inner->gc($max_lifetime);
    }

    public function create_sid(): string
    {
        return $this->inner->create_sid();
    }

    public function validateId(string $id): bool
    {
        return $this->inner->validateId($id);
    }

    public function updateTimestamp(string $id, string $data): bool
    {
        $this->writes++;
        return $this->writeResult = $this->inner->updateTimestamp($id, $data);
    }
}

$mode = (string) ($_GET['mode'] ?? '');
$sid = (string) ($_GET['sid'] ?? '');
$rid = (int) ($_GET['rid'] ?? -1);
$dsn = (string) ($_SERVER['RL_DSN'] ?? '');
$options = json_decode((string) ($_SERVER['RL_OPTIONS'] ?? '{}'), true) ?: [];
$out = ['kind' => 'session', 'mode' => $mode, 'rid' => $rid, 'pid' => getmypid(), 'started' => false,
    'acked' => false, 'closed' => null, 'count' => null, 'exception' => null];
$handler = null;
try {
    if ($mode === 'class') {
        $handler = new RecordingHandler(new RedisLockingSessionHandler($dsn, $options));
        session_set_save_handler($handler, true);
    } else {
        ini_set('session.save_handler', 'redis_lease');
        ini_set('session.save_path', $dsn);
        foreach ($options as $k => $v) {
            ini_set("redis_lease.session.$k", is_bool($v) ? ($v ? '1' : '0') : (string) $v);
        }
    }
    // This worker's own counts (one request at a time), from when the lock is
    // taken (what session_start() settled of earlier requests counted before):
    // a write refused because a logout revoked its lock returns true quietly
    // (session_revoked); a logout whose lease was lost revokes whoever holds,
    // deleting what is there then (session_lost, counted once when the watchdog
    // gives the lease up or when the destroy finds it gone; failover_lost; or
    // session_revoked, when the watchdog found it revoked but the destroy did
    // not: a destroy told revoked, which deletes nothing, counts so too, which
    // only widens what the checker excuses).
    $counts = static fn(): array => array_intersect_key(\RedisLease\metrics(),
        ['session_revoked' => 0, 'session_lost' => 0, 'failover_lost' => 0]);
    session_id($sid);
    $out['started'] = session_start();
    $opened = $counts();
    $out['t_read'] = hrtime(true);
    // The ids it read: the checker looks for a logout's in later requests.
    $out['read'] = $out['started'] ? array_map('intval', $_SESSION['ids'] ?? []) : null;
    if ($out['started'] && ($_GET['logout'] ?? '') === '1') {
        $out['logout'] = true;
        $before = count($warnings);
        $c0 = $opened;
        $out['t_write'] = hrtime(true);
        if (($_GET['plant'] ?? '') === 'logout_undone' && intdiv($rid, 80) % 2 === 0) {
            session_abort();
            $acked = true; // the lie the checker must catch
        } else {
            $destroyed = session_destroy();
            $failed = array_filter(array_slice($warnings, $before),
                static fn(string $w) => str_contains($w, 'destruction failed'));
            $acked = $mode === 'class'
                ? $destroyed && $handler->destroyResult === true
                : $destroyed && $failed === [];
        }
        $out['t_ack'] = hrtime(true);
        $out['acked'] = $acked;
        $c1 = $counts();
        $out['revoking'] = $c1 != $c0;
    } elseif ($out['started']) {
        $ids = $_SESSION['ids'] ?? [];
        $ids[] = $rid;
        $_SESSION['ids'] = $ids;
        $out['count'] = count($ids);
        $planted = ($_GET['plant'] ?? '') === 'ack_unwritten' && intdiv($rid, 2) % 10 === 0;
        $before = count($warnings);
        $c0 = $counts();
        $out['t_write'] = hrtime(true);
        if ($planted) {
            session_abort();
            $out['closed'] = true;
            $acked = true; // the lie the checker must catch
        } else {
            $out['closed'] = session_write_close();
            $failed = array_filter(array_slice($warnings, $before),
                static fn(string $w) => str_contains($w, 'Failed to write session data'));
            $acked = $mode === 'class'
                ? $handler->writes === 1 && $handler->writeResult === true
                : $out['closed'] === true && $failed === [];
        }
        $out['t_ack'] = hrtime(true);
        $out['revoked'] = $counts()['session_revoked'] > $c0['session_revoked'];
        $out['acked'] = $acked;
    }
} catch (Throwable $e) {
    $out['exception'] = get_class($e) . ': ' . $e->getMessage();
}
$out['warnings'] = array_slice($warnings, 0, 4);
$out['t0'] = $t0;
$out['t_end'] = hrtime(true);
header('Content-Type: application/json');
echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE), "\n";
