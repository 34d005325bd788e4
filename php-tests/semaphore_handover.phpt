--TEST--
DistributedSemaphore handover: a permit taken in one process, detached (its end releases nothing) and restored in another by its token (released there, refreshed there, checked there); restore() asks nothing of Redis; a stale token holds nothing and frees nobody else's permit; a malformed token or limit is a ValueError
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('sem-handover');
$holders = rl_lock_key($k) . ':semaphore:holders';

$child = rl_spawn_php('
$s = new DistributedSemaphore(' . rl_export($k) . ', 2, 10.0, ' . rl_export($dsn) . ');
echo $s->acquire() ? "held\n" : "busy\n";
echo $s->detach(), "\n";
echo $s->getToken() === null ? "no permit here\n" : "still holds\n";
');
rl_same('the first process takes a permit', 'held', $child->readLine(10.0));
$token = (string) $child->readLine(10.0);
rl_ok('detach() gives its token', (bool) preg_match('/^[0-9a-f]{32}$/', $token), $token);
rl_same('and the object holds nothing afterwards', 'no permit here', $child->readLine(10.0));
rl_same('the first process ends', 0, $child->wait(10.0));
rl_same('its end released nothing: the permit is still held', 1, $raw->cmd('ZCARD', $holders));

$count = fn() => (int) preg_replace('/.*total_commands_processed:(\d+).*/s', '$1', $raw->cmd('INFO', 'stats'));
$before = $count();
$s = DistributedSemaphore::restore($k, 2, $token, 10.0, $dsn);
rl_same('restore() sent nothing (only our INFO ran between)', 1, $count() - $before);
rl_same('its token is there', $token, $s->getToken());
rl_same('isAcquired() there', true, $s->isAcquired());
rl_same('refresh() there', true, $s->refresh(20.0));
$other = new DistributedSemaphore($k, 2, 10.0, $dsn);
rl_same('the other permit is free to take', true, $other->acquire());
$third = new DistributedSemaphore($k, 2, 10.0, $dsn);
rl_same('but no third', false, $third->acquire());
rl_same('release() there', true, $s->release());
rl_same('a third gets the permit it freed', true, $third->acquire());
rl_same('a stale token restored: release() false', false, DistributedSemaphore::restore($k, 2, $token, 10.0, $dsn)->release());
rl_same('... isAcquired() false', false, DistributedSemaphore::restore($k, 2, $token, 10.0, $dsn)->isAcquired());
rl_same('... and the two permits held are untouched', 2, $raw->cmd('ZCARD', $holders));
$other->release();
$third->release();

foreach ([['not-a-token', 2], [str_repeat('G', 32), 2], [$token, 0], [$token, -1]] as [$bad, $limit]) {
    try {
        DistributedSemaphore::restore($k, $limit, $bad, 10.0, $dsn);
        rl_ok('restore() refuses ' . var_export([$bad, $limit], true), false);
    } catch (ValueError $e) {
        rl_ok('restore() refuses a bad ' . ($limit > 0 ? '$token' : '$limit') . ' (ValueError naming it)',
            str_contains($e->getMessage(), $limit > 0 ? '$token' : '$limit'), $e->getMessage());
    }
}
echo "done\n";
?>
--EXPECT--
ok: the first process takes a permit
ok: detach() gives its token
ok: and the object holds nothing afterwards
ok: the first process ends
ok: its end released nothing: the permit is still held
ok: restore() sent nothing (only our INFO ran between)
ok: its token is there
ok: isAcquired() there
ok: refresh() there
ok: the other permit is free to take
ok: but no third
ok: release() there
ok: a third gets the permit it freed
ok: a stale token restored: release() false
ok: ... isAcquired() false
ok: ... and the two permits held are untouched
ok: restore() refuses a bad $token (ValueError naming it)
ok: restore() refuses a bad $token (ValueError naming it)
ok: restore() refuses a bad $limit (ValueError naming it)
ok: restore() refuses a bad $limit (ValueError naming it)
done
