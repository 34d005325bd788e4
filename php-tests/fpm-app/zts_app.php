<?php
/*
 * Requests of the threaded-server tests (zts_apache_*.phpt), run by Apache's
 * mod_php in threads. DSN: $_SERVER['RL_DSN']; control keys in the Redis at
 * $_SERVER['RL_CTL_PORT'].
 *
 *   zts_app.php?op=counter&key=K&file=F[&nolock=1]
 *       read-increment-write of the number in file F under K's synchronized()
 *       (without it: nolock=1); replies with the value written, the fence, and
 *       when the critical section began and ended
 *   zts_app.php?op=hold&key=K&ttl=S&seconds=S&ctl=C
 *       holds K (autoRenew, ttl S) for `seconds`, saying so at C:held; replies
 *       whether the hold lasted (isAcquired(), the fence unchanged, release())
 *   zts_app.php?op=vanish&key=K&sid=ID&ctl=C
 *       holds lock K (autoRenew) and session ID's lock (renewed), says so at
 *       C:held, then ends its thread (pthread_exit through FFI) in the middle of
 *       the request, as a crashing thread would: no shutdown hook runs for it
 *   zts_app.php?op=bailout&key=K&sid=ID&how=fatal|timeout
 *       holds lock K and session ID's lock, then ends in a fatal error or runs past
 *       max_execution_time (1 s here): PHP's bailout, on a thread that lives on
 *   zts_app.php?op=classes
 *       what MINIT and the first RINIT set up: read()'s return type, the
 *       #[SensitiveParameter] marks, the session save handler
 *   zts_app.php?op=metrics
 *       RedisLease\metrics() of this process, and of the server (every process)
 */
require __DIR__ . '/common.inc';


$dsn = $_SERVER['RL_DSN'] ?? null;
$op = app_param('op', '');

switch ($op) {
    case 'counter':
        $file = (string) app_param('file');
        $bump = static function () use ($file): array {
            $in = microtime(true);
            $n = (int) file_get_contents($file);
            usleep(2000); // the work between read and write that a lost update needs
            file_put_contents($file, (string) ($n + 1));
            return ['value' => $n + 1, 'in' => $in, 'out' => microtime(true)];
        };
        if (app_param('nolock') === '1') {
            app_reply($bump() + ['fence' => null]);
            break;
        }
        $lock = new DistributedLock((string) app_param('key'), 10.0, $dsn);
        $r = $lock->synchronized(static function () use ($bump, $lock): array {
            return $bump() + ['fence' => $lock->getFencingToken()];
        }, 30.0);
        app_reply($r);
        break;

    case 'hold':
        $lock = new DistributedLock((string) app_param('key'), (float) app_param('ttl', '1'), $dsn, autoRenew: true);
        $got = $lock->acquire(5.0);
        $fence = $got ? $lock->getFencingToken() : null;
        app_ctl()->cmd('INCR', app_param('ctl') . ':held');
        usleep((int) ((float) app_param('seconds', '3') * 1e6)); // the request's work while it holds the lock
        app_reply([
            'acquired' => $got,
            'still_held' => $got && $lock->isAcquired(),
            'fence_kept' => $got && $lock->getFencingToken() === $fence,
            'released' => $got && $lock->release(),
            'metrics' => RedisLease\metrics(),
        ]);
        break;

    case 'vanish':
        $lock = new DistributedLock((string) app_param('key'), 10.0, $dsn, autoRenew: true);
        $got = $lock->acquire(5.0);
        session_set_save_handler(new RedisLockingSessionHandler($dsn, ['lock_ttl' => 10.0, 'lock_renew' => true]));
        session_id((string) app_param('sid'));
        $started = session_start();
        $_SESSION['vanished'] = true; // never written: the thread ends first
        app_ctl()->cmd('SET', app_param('ctl') . ':held', json_encode(['lock' => $got, 'session' => $started,
            'tid' => (int) basename((string) readlink('/proc/thread-self')), 'pid' => getmypid()]));
        FFI::cdef('void pthread_exit(void *retval);', 'libc.so.6')->pthread_exit(null);
        app_reply(['error' => 'pthread_exit returned']);
        break;

    case 'bailout':
        $lock = new DistributedLock((string) app_param('key'), 30.0, $dsn, autoRenew: true);
        $lock->acquire(5.0);
        session_set_save_handler(new RedisLockingSessionHandler($dsn, ['lock_ttl' => 30.0, 'lock_renew' => true]));
        session_id((string) app_param('sid'));
        session_start();
        $_SESSION['bailed'] = true;
        if (app_param('how') === 'timeout') {
            set_time_limit(1);
            while (true) {
                // busy until max_execution_time ends the request
            }
        }
        // (Not trigger_error(): common.inc's error handler would take it.)
        the_request_ends_in_a_fatal_error();
        break;

    case 'classes':
        $sensitive = static function (string $class, string $method): array {
            $marked = [];
            foreach ((new ReflectionMethod($class, $method))->getParameters() as $p) {
                // Each marked once (the attribute is not repeatable).
                $n = count($p->getAttributes(SensitiveParameter::class));
                if ($n > 0) {
                    $marked[] = $n === 1 ? $p->getName() : $p->getName() . " x$n";
                }
            }
            return $marked;
        };
        // Functions are copied into each thread's table (classes are shared).
        $sensitiveFn = static function (string $function): array {
            $marked = [];
            foreach ((new ReflectionFunction($function))->getParameters() as $p) {
                // Each marked once (the attribute is not repeatable).
                $n = count($p->getAttributes(SensitiveParameter::class));
                if ($n > 0) {
                    $marked[] = $n === 1 ? $p->getName() : $p->getName() . " x$n";
                }
            }
            return $marked;
        };
        app_reply([
            'read_returns' => (string) (new ReflectionMethod(RedisLockingSessionHandler::class, 'read'))->getReturnType(),
            'lock_sensitive' => $sensitive(DistributedLock::class, '__construct'),
            'handler_sensitive' => $sensitive(RedisLockingSessionHandler::class, '__construct'),
            'write_sensitive' => $sensitive(RedisLockingSessionHandler::class, 'write'),
            'inspect_sensitive' => $sensitiveFn('RedisLease\\inspect'),
            'leases_sensitive' => $sensitiveFn('RedisLease\\leases'),
            'save_handler' => ini_get('session.save_handler'),
        ]);
        break;

    case 'metrics':
        app_reply(['metrics' => RedisLease\metrics(), 'server' => RedisLease\metrics(true)]);
        break;

    default:
        http_response_code(400);
        app_reply(['error' => "unknown op '$op'"]);
}
