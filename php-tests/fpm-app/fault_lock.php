<?php
/*
 * DistributedLock requests of the fault tests. The DSN is $_SERVER['RL_DSN']
 * when given, else the ini setting redis_lease.dsn (with the ini timeouts).
 *
 *   fault_lock.php?op=once&key=K&ttl=S&wait=S
 *       acquire(wait), check isAcquired(), release(); with store=NAME also
 *       write our fencing token into the fenced store NAME while holding it.
 *   fault_lock.php?op=hold&key=K&ttl=S&wait=S&ctl=P&go_timeout=S&store=NAME
 *       synchronized(): inside the callback publish P:started (this worker's
 *       pid) and P:fence in the control Redis (RL_CTL_PORT), wait until P:go
 *       exists, then write our fencing token into the fenced store NAME.
 *
 * The fenced store is a hash {fence, writer} in the control Redis that only
 * accepts a write carrying a higher fencing token than the last one, as the
 * README recommends for the storage a lock protects.
 *
 * Replies with JSON: ok, acquired, held (isAcquired), released, fence,
 * stored (1 accepted, 0 refused by the fence), exception (class) and message
 * when one was thrown, times.
 */
require __DIR__ . '/common.inc';

const FENCED_WRITE = <<<'LUA'
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if last < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'writer', ARGV[2])
  return 1
end
return 0
LUA;

function fenced_write(string $store, ?int $fence, string $writer): ?int
{
    if ($store === '' || $fence === null) {
        return null;
    }
    return app_ctl()->cmd('EVAL', FENCED_WRITE, 1, $store, $fence, $writer);
}

$op = app_param('op', 'once');
$key = (string) app_param('key', 'fault-lock');
$ttl = (float) app_param('ttl', '1');
$wait = (float) app_param('wait', '2');
$store = (string) app_param('store', '');
$dsn = $_SERVER['RL_DSN'] ?? null;
$out = ['op' => $op, 'ok' => false, 'acquired' => null, 'held' => null, 'released' => null,
    'fence' => null, 'stored' => null, 'exception' => null, 'message' => null];
try {
    $lock = new DistributedLock($key, $ttl, $dsn === '' ? null : $dsn);
    if ($op === 'hold') {
        $ctl = (string) app_param('ctl', 'ctl');
        $out['result'] = $lock->synchronized(static function () use ($lock, $ctl, $store, &$out): string {
            $out['fence'] = $lock->getFencingToken();
            app_ctl()->cmd('SET', "$ctl:fence", (string) $out['fence']);
            app_ctl()->cmd('SET', "$ctl:started", (string) getmypid());
            $out['went'] = app_await_key("$ctl:go", (float) app_param('go_timeout', '10'));
            $out['stored'] = fenced_write($store, $out['fence'], "pid " . getmypid());
            return 'callback done';
        }, $wait);
        $out['ok'] = true;
    } else {
        $out['acquired'] = $lock->acquire($wait);
        if ($out['acquired']) {
            $out['fence'] = $lock->getFencingToken();
            $out['held'] = $lock->isAcquired();
            $out['stored'] = fenced_write($store, $out['fence'], "pid " . getmypid());
            $out['released'] = $lock->release();
        }
        $out['ok'] = $out['acquired'] === true && $out['held'] === true && $out['released'] === true;
    }
} catch (Throwable $e) {
    $out['exception'] = get_class($e);
    $out['message'] = $e->getMessage();
}
app_reply($out);
