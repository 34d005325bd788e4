<?php
/*
 * App of security_fpm_logs.phpt: one action per request, with NO error
 * handler, so that every warning and uncaught exception goes where a real
 * deployment sends it: the pool's PHP error log.
 *
 *   security_app.php?what=ACTION&sid=ID     DSN (where one is needed): $_SERVER['RL_DSN']
 *
 * Actions:
 *   native_session   session.save_handler=redis_lease from php.ini, DSN from redis_lease.dsn
 *   class_session    session_set_save_handler(new RedisLockingSessionHandler(RL_DSN))
 *   lock_ini         DistributedLock with the ini DSN; acquire() (exception not caught)
 *   lock_dsn         DistributedLock with RL_DSN; acquire() (exception not caught)
 *   write_destroyed  RedisLockingSessionHandler(RL_DSN)->write(sid) after destroy(sid): our warning names the id
 *   phpinfo          phpinfo()
 */
$what = (string) ($_GET['what'] ?? '');
$sid = (string) ($_GET['sid'] ?? '');
$dsn = $_SERVER['RL_DSN'] ?? null;

switch ($what) {
    case 'native_session':
        session_id($sid);
        if (session_start()) {
            $_SESSION['x'] = 1;
            session_write_close();
        }
        echo "session done\n";
        break;
    case 'class_session':
        session_set_save_handler(new RedisLockingSessionHandler($dsn), true);
        session_id($sid);
        if (session_start()) {
            $_SESSION['x'] = 1;
            session_write_close();
        }
        echo "session done\n";
        break;
    case 'lock_ini':
        (new DistributedLock('fpm-sec'))->acquire();
        echo "lock acquired\n";
        break;
    case 'lock_dsn':
        (new DistributedLock('fpm-sec', 5.0, $dsn))->acquire();
        echo "lock acquired\n";
        break;
    case 'write_destroyed':
        // Written again after this request destroyed it: refused, with a warning.
        $h = new RedisLockingSessionHandler($dsn);
        $h->destroy($sid);
        var_export($h->write($sid, 'x|i:1;'));
        echo "\n";
        break;
    case 'phpinfo':
        phpinfo();
        break;
    default:
        http_response_code(400);
        echo "unknown action\n";
}
