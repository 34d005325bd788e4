--TEST--
An application's own session handler built on DistributedLock, registered without its shutdown function (session_set_save_handler($h, false)): ext/session writes the session in its RSHUTDOWN, which runs after ours; the lock its read() took is still held there, and its close() releases it (review, stop 55: before, our RSHUTDOWN released every lock the request held first, and write() ran without its lock: a waiting request could read and write the session in between)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$sid = bin2hex(random_bytes(16));
$k = rl_key('user-handler');

$child = rl_spawn_php('
final class LockedHandler implements SessionHandlerInterface
{
    private ?DistributedLock $lock = null;
    public function __construct(private string $dsn, private string $key, private RlRaw $raw) {}
    public function open(string $path, string $name): bool { return true; }
    public function read(string $id): string|false
    {
        $this->lock = new DistributedLock($this->key, 30.0, $this->dsn);
        if (!$this->lock->acquire(5.0)) {
            return false;
        }
        return (string) $this->raw->cmd("GET", "data:$id");
    }
    public function write(string $id, string $data): bool
    {
        // The lock read() took is still ours: refresh() is owner-checked.
        $held = $this->lock !== null && $this->lock->refresh();
        $this->raw->cmd("SET", "outcome:$id", $held ? "held" : "lost");
        if ($held) {
            $this->raw->cmd("SET", "data:$id", $data);
        }
        return $held;
    }
    public function close(): bool
    {
        $released = $this->lock?->release();
        $this->raw->cmd("SET", "closed:" . session_id(), var_export($released, true));
        $this->lock = null;
        return true;
    }
    public function destroy(string $id): bool { return true; }
    public function gc(int $max): int|false { return 0; }
}
session_set_save_handler(new LockedHandler(' . rl_export($dsn) . ', ' . rl_export($k) . ', new RlRaw(' . $srv['port'] . ')), false);
session_id(' . rl_export($sid) . ');
session_start();
$_SESSION["n"] = 1;
echo "started\n";
// The request ends here: ext/session writes and closes in its RSHUTDOWN.
', ['session.use_cookies' => '0', 'session.use_strict_mode' => '0', 'session.cache_limiter' => '']);
rl_same('the child started its session', 'started', $child->readLine());
rl_same('the child exited', 0, $child->wait());
rl_same('write() found the lock its read() took still held', 'held', $raw->cmd('GET', "outcome:$sid"));
rl_same('... and wrote the session', 'n|i:1;', $raw->cmd('GET', "data:$sid"));
rl_same('close() released it', 'true', $raw->cmd('GET', "closed:$sid"));
rl_same('nothing of the lock is left', 0, $raw->cmd('EXISTS', rl_lock_key($k)));
echo "done\n";
?>
--EXPECT--
ok: the child started its session
ok: the child exited
ok: write() found the lock its read() took still held
ok: ... and wrote the session
ok: close() released it
ok: nothing of the lock is left
done
