<?php
/*
 * A read/write-lock or semaphore request of the failover matrix: take the hold
 * its `shape` asks for on `name`, enter the guarded resource on the control
 * Redis (RL_CTL_PORT, which no fault touches) as what it holds, work a little,
 * leave, release. Replies with one JSON object of every step's outcome and
 * hrtime(true) timestamps (CLOCK_MONOTONIC, comparable across processes).
 *
 *   shared.php?shape=S&name=N&rid=R&ttl=S&wait=S&res=KEY&work_us=U[&limit=L&permits=P][&moved=1][&refresh=1]
 *   FastCGI params: RL_DSN, RL_CTL_PORT
 *
 * Shapes: read (acquireRead), write (acquire, with its fencing token), up (a
 * read, then acquire() on it: an upgrade, with a fresh fencing token; refused
 * or timed out, it leaves as the reader it was), down (a write, then
 * acquireRead() on it: a downgrade), permit (`permits` at once of a DistributedSemaphore of `limit`).
 * Any shape may be moved (detach(), then restore() in a fresh object, which asks Redis what the token
 * holds before it is used) and refreshed (refresh() between its two spells of work).
 *
 * The guarded resource `res` (a hash, and lists res:violations and res:fenced)
 * is updated by one Lua script per step, so each check is atomic whatever the
 * lock does: a writer entering beside anyone, a reader beside a writer, a
 * permit beyond the limit are violations (with the time and who was inside); a
 * writer's fencing token not above every writer's before it is logged as
 * fenced. A downgrade counts as a reader from the moment it is asked for; an
 * upgrade as a writer once acquire() said so.
 */

require_once __DIR__ . '/../../../php-tests/inc/redis.inc';

const RESOURCE = <<<'LUA'
-- KEYS[1] the resource, KEYS[2] its violations, KEYS[3] its fenced entries
-- ARGV[1] the step, ARGV[2] who, ARGV[3] hrtime now, ARGV[4] fence (writers) or limit (permits),
-- ARGV[5] how many permits (default 1)
local res, act, who, t, n = KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local function get(f) return tonumber(redis.call('HGET', res, f) or '0') end
local r, w, p = get('readers'), get('writers'), get('permits')
local function bad(what)
  redis.call('RPUSH', KEYS[2], cjson.encode({what = what, who = who, t = t, readers = r, writers = w, permits = p}))
end
local function fenced()
  local max = get('fence')
  if n <= max then
    redis.call('RPUSH', KEYS[3], cjson.encode({who = who, fence = n, max = max, t = t}))
    return true
  end
  redis.call('HSET', res, 'fence', ARGV[4])
  return false
end
if act == 'enter_r' then
  if w > 0 then bad('a reader entered beside a writer') end
  r = r + 1
elseif act == 'leave_r' then
  r = r - 1
elseif act == 'enter_w' or act == 'r2w' then
  if act == 'r2w' then r = r - 1 end
  if fenced() then return 0 end
  if w > 0 then bad('a writer entered beside a writer') end
  if r > 0 then bad('a writer entered beside readers') end
  w = w + 1
elseif act == 'leave_w' then
  w = w - 1
elseif act == 'w2r' then
  w, r = w - 1, r + 1
elseif act == 'enter_p' then
  local w = tonumber(ARGV[5]) or 1
  if p + w > n then bad('a holder of ' .. w .. ' permits entered beyond the limit of ' .. n) end
  p = p + w
elseif act == 'leave_p' then
  p = p - (tonumber(ARGV[5]) or 1)
end
redis.call('HSET', res, 'readers', r, 'writers', w, 'permits', p)
return 1
LUA;

$t0 = hrtime(true);
$warnings = [];
set_error_handler(static function (int $level, string $message) use (&$warnings): bool {
    $warnings[] = $message;
    return true;
});
$shape = (string) ($_GET['shape'] ?? 'read');
$name = (string) ($_GET['name'] ?? '');
$rid = (string) ($_GET['rid'] ?? '');
$res = (string) ($_GET['res'] ?? '');
$ttl = (float) ($_GET['ttl'] ?? 3.0);
$wait = (float) ($_GET['wait'] ?? 2.0);
$limit = (int) ($_GET['limit'] ?? 2);
$permits = (int) ($_GET['permits'] ?? 1);
// moved=1: the hold is detached and restored in a fresh object before it is used (a token handed
// on); refresh=1: it is refreshed between its two spells of work.
$moved = ($_GET['moved'] ?? '') === '1';
$refresh = ($_GET['refresh'] ?? '') === '1';
$out = ['kind' => 'shared', 'shape' => $shape, 'rid' => (int) $rid, 'pid' => getmypid(), 'acquired' => null,
    'moved' => null, 'refreshed' => null, 'converted' => null, 'entered' => null, 'released' => null,
    'exception' => null, 'step' => 'construct'];
$ctl = null;
$inside = null; // what we are recorded inside the resource as, so that an exception still leaves

/** Records step $act of this request in the resource; false when a writer's fence was refused. */
$record = static function (string $act, int $n = 0) use (&$ctl, $res, $rid, $permits): bool {
    return $ctl->cmd('EVAL', RESOURCE, 3, $res, "$res:violations", "$res:fenced", $act, "#$rid",
        (string) hrtime(true), (string) $n, (string) $permits) === 1;
};
$work = static fn() => usleep((int) ($_GET['work_us'] ?? 3000));

try {
    $ctl = new RlRaw((int) $_SERVER['RL_CTL_PORT'], 2.0);
    $dsn = (string) $_SERVER['RL_DSN'];
    $obj = $shape === 'permit' ? new DistributedSemaphore($name, $limit, $ttl, $dsn) : new DistributedLock($name, $ttl, $dsn);
    $out['step'] = 'acquire';
    // plant=unheld (only for showing that the checker catches a broken app; the
    // matrix asks it of one writer in 3): this writer skips the lock, enters with
    // a fence of its own, works 20 ms inside, and still reports success.
    $unheld = ($_GET['plant'] ?? '') === 'unheld' && $shape === 'write';
    $out['acquired'] = $unheld || match ($shape) {
        'read', 'up' => $obj->acquireRead($wait),
        'permit' => $obj->acquire($wait, $permits),
        default => $obj->acquire($wait),
    };
    $out['t_acq'] = hrtime(true);
    if ($out['acquired'] && $moved && !$unheld) {
        // The restored object counts on nothing until it has asked Redis what the token holds.
        $out['step'] = 'move';
        // Null: lost since (a failover's window): nothing to move, not acquired.
        $token = $obj->detach();
        if ($token !== null) {
            $obj = $shape === 'permit'
                ? DistributedSemaphore::restore($name, $limit, $token, $ttl, $dsn)
                : DistributedLock::restore($name, $token, $ttl, $dsn);
        }
        $out['moved'] = $token !== null && $obj->isAcquired();
        $out['acquired'] = $out['moved'];
    }
    if ($out['acquired']) {
        $out['step'] = 'enter';
        switch ($shape) {
            case 'read':
            case 'up':
                $record('enter_r');
                $inside = 'r';
                break;
            case 'write':
            case 'down':
                // Null: the hold was lost since (a failover's window): not entered, not ok.
                $fence = $unheld ? PHP_INT_MAX - (int) $rid : $obj->getFencingToken();
                $out['entered'] = $fence !== null && $record('enter_w', $fence);
                $inside = $out['entered'] ? 'w' : null;
                break;
            case 'permit':
                $record('enter_p', $limit);
                $inside = 'p';
                break;
        }
        $out['entered'] ??= true;
        $unheld ? usleep(20000) : $work();
        $lost = false;
        if ($refresh && !$unheld) {
            // False: the lease ran out meanwhile (a failover's window); nothing more is done inside.
            $out['step'] = 'refresh';
            $out['refreshed'] = $obj->refresh();
            $lost = !$out['refreshed'];
            if (!$lost) {
                $work();
            }
        }
        // (A hold lost at its refresh is left below, and released.)
        if (!$lost && $shape === 'up') {
            $out['step'] = 'upgrade';
            $out['converted'] = $obj->acquire($wait);
            if ($out['converted']) {
                // Null (lost since), or fenced (RESOURCE changes nothing then): it
                // leaves as the reader it is still recorded as.
                $fence = $obj->getFencingToken();
                $ok = $fence !== null && $record('r2w', $fence);
                $inside = $ok ? 'w' : 'r';
                $out['entered'] = $ok;
                $work();
            }
        } elseif (!$lost && $shape === 'down' && $inside === 'w') {
            $out['step'] = 'downgrade';
            $record('w2r');
            $inside = 'r';
            $out['converted'] = $obj->acquireRead();
            $work();
        }
        $out['step'] = 'leave';
        if ($inside !== null) {
            $record('leave_' . $inside);
            $inside = null;
        }
        $out['step'] = 'release';
        $out['t_rel0'] = hrtime(true);
        $out['released'] = $unheld || $obj->release();
    }
    $out['step'] = 'done';
} catch (Throwable $e) {
    $out['exception'] = get_class($e) . ': ' . $e->getMessage();
    if ($inside !== null && $ctl !== null) {
        try {
            $record('leave_' . $inside);
        } catch (Throwable) {
        }
    }
}
$out['warnings'] = array_slice($warnings, 0, 4);
$out['t0'] = $t0;
$out['t_end'] = hrtime(true);
header('Content-Type: application/json');
echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE), "\n";
