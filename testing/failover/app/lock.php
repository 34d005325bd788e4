<?php
/*
 * A lock request of the failover matrix: acquire DistributedLock `name` (waiting
 * up to `wait` s), take its fencing token, "enter" the guarded resource on the
 * control Redis (RL_CTL_PORT, which no fault touches), do a little work there,
 * "exit", and release. Replies with one JSON object of every step's outcome and
 * hrtime(true) timestamps (CLOCK_MONOTONIC, comparable across processes).
 *
 *   lock.php?name=N&rid=R&ttl=S&wait=S&res=KEY&work_us=U
 *   FastCGI params: RL_DSN, RL_CTL_PORT
 *
 * The guarded resource `res` (keys res, res:inside, res:overlaps, res:fenced,
 * res:count) is entered with one Lua script: a fencing token not higher than the
 * highest one seen is refused ("fenced", logged in res:fenced); otherwise it
 * becomes the highest, and if another holder is inside (entered, not yet
 * exited) the entry is logged in res:overlaps with who was inside: an OVERLAP,
 * two holders at once.
 */

require_once __DIR__ . '/../../../php-tests/inc/redis.inc';

const ENTER = <<<'LUA'
local tok = tonumber(ARGV[1])
local max = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tok <= max then
  redis.call('RPUSH', KEYS[4], cjson.encode({rid = ARGV[2], token = tok, max = max, t = ARGV[3]}))
  return {0, max}
end
redis.call('SET', KEYS[1], ARGV[1])
local inside = redis.call('HGETALL', KEYS[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
if #inside > 0 then
  redis.call('RPUSH', KEYS[3], cjson.encode({rid = ARGV[2], token = tok, inside = inside, t = ARGV[3]}))
  return {2, max}
end
return {1, max}
LUA;

const WORK_EXIT = <<<'LUA'
redis.call('INCR', KEYS[2])
return redis.call('HDEL', KEYS[1], ARGV[1])
LUA;

$t0 = hrtime(true);
$warnings = [];
set_error_handler(static function (int $level, string $message) use (&$warnings): bool {
    $warnings[] = $message;
    return true;
});
$name = (string) ($_GET['name'] ?? '');
$rid = (string) ($_GET['rid'] ?? '');
$res = (string) ($_GET['res'] ?? '');
$out = ['kind' => 'lock', 'rid' => (int) $rid, 'pid' => getmypid(), 'acquired' => null, 'token' => null,
    'enter' => null, 'released' => null, 'exception' => null, 'step' => 'construct'];
try {
    $ctl = new RlRaw((int) $_SERVER['RL_CTL_PORT'], 2.0);
    $lock = new DistributedLock($name, (float) $_GET['ttl'], (string) $_SERVER['RL_DSN']);
    $out['step'] = 'acquire';
    $out['t_acq0'] = hrtime(true);
    // plant=unheld (only for showing that the checker catches a broken app; the
    // matrix asks it of one lock request in 10): this request skips the lock, takes the next token by itself and works
    // 20 ms inside, and still reports success.
    $unheld = ($_GET['plant'] ?? '') === 'unheld';
    $out['acquired'] = $unheld ? true : $lock->acquire((float) $_GET['wait']);
    $out['t_acq1'] = hrtime(true);
    if ($out['acquired']) {
        $out['step'] = 'fence';
        $out['token'] = $unheld ? (int) $ctl->cmd('GET', $res) + 1 : $lock->getFencingToken();
        $out['t_fence'] = hrtime(true);
        $out['step'] = 'enter';
        $out['t_enter0'] = hrtime(true);
        $e = $ctl->cmd('EVAL', ENTER, 4, $res, "$res:inside", "$res:overlaps", "$res:fenced",
            (string) $out['token'], $rid, (string) $out['t_enter0']);
        $out['t_enter1'] = hrtime(true);
        $out['enter'] = [0 => 'fenced', 1 => 'entered', 2 => 'overlap'][$e[0]];
        if ($e[0] !== 0) {
            try {
                usleep($unheld ? 20000 : (int) $_GET['work_us']); // the work, inside the resource
            } finally {
                $out['t_exit0'] = hrtime(true);
                $ctl->cmd('EVAL', WORK_EXIT, 2, "$res:inside", "$res:count", $rid);
                $out['t_exit1'] = hrtime(true);
            }
        }
        $out['step'] = 'release';
        $out['t_rel0'] = hrtime(true);
        $out['released'] = $unheld ? true : $lock->release();
        $out['t_rel1'] = hrtime(true);
    }
    $out['step'] = 'done';
} catch (Throwable $e) {
    $out['exception'] = get_class($e) . ': ' . $e->getMessage();
}
$out['warnings'] = array_slice($warnings, 0, 4);
$out['t0'] = $t0;
$out['t_end'] = hrtime(true);
header('Content-Type: application/json');
echo json_encode($out, JSON_INVALID_UTF8_SUBSTITUTE), "\n";
