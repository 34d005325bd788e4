<?php
/*
 * A minimal Symfony application (Debian's Symfony 5.4 components) for the bridge's tests, served by
 * php-fpm: HttpKernel with one controller per path, and the session as FrameworkBundle wires it
 * (SessionListener with a session factory over NativeSessionStorage, which saves on kernel.response).
 * Warnings are turned into exceptions, as Symfony's debug mode does.
 *
 * FastCGI param APP_SESSION picks the handler, as framework.session.handler_id would:
 *   native - handler_id: null: PHP's own session module, i.e. session.save_handler = redis_lease from
 *            the pool's php.ini (the session.save_path DSN too)
 *   object - handler_id: a RedisLockingSessionHandler service (APP_LEASE_DSN)
 *   object-sf - the same, with RedisSessionHandler's key prefix ("sf_s"): both share sessions
 *   redis  - Symfony's RedisSessionHandler over phpredis (APP_REDIS_PORT)
 *   file   - Symfony's NativeFileSessionHandler (APP_FILES)
 */
require_once 'Psr/Container/autoload.php'; // Debian's autoloaders, from the include_path (/usr/share/php)
require_once 'Symfony/Component/HttpFoundation/autoload.php';
require_once 'Symfony/Component/HttpKernel/autoload.php';
require_once 'Symfony/Component/EventDispatcher/autoload.php';
// Symfony 6.4+'s SessionListener implements ResetInterface, which Debian's HttpKernel autoloader does not load.
require_once 'Symfony/Contracts/Service/autoload.php';

use Psr\Container\ContainerInterface;
use Symfony\Component\EventDispatcher\EventDispatcher;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\RequestStack;
use Symfony\Component\HttpFoundation\Session\SessionFactory;
use Symfony\Component\HttpFoundation\Session\Storage\Handler\NativeFileSessionHandler;
use Symfony\Component\HttpFoundation\Session\Storage\Handler\RedisSessionHandler;
use Symfony\Component\HttpFoundation\Session\Storage\NativeSessionStorageFactory;
use Symfony\Component\HttpKernel\Controller\ArgumentResolver;
use Symfony\Component\HttpKernel\Controller\ControllerResolver;
use Symfony\Component\HttpKernel\Event\RequestEvent;
use Symfony\Component\HttpKernel\EventListener\SessionListener;
use Symfony\Component\HttpKernel\HttpKernel;
use Symfony\Component\HttpKernel\KernelEvents;

set_error_handler(static function (int $level, string $message, string $file, int $line): bool {
    throw new ErrorException($message, 0, $level, $file, $line);
});

/** The few services SessionListener asks its container for. */
final class Services implements ContainerInterface
{
    public function __construct(private array $services)
    {
    }

    public function get(string $id)
    {
        return $this->services[$id];
    }

    public function has(string $id): bool
    {
        return isset($this->services[$id]);
    }
}

$handler = match ($_SERVER['APP_SESSION']) {
    'native' => null,
    'object' => new RedisLockingSessionHandler($_SERVER['APP_LEASE_DSN']),
    'object-sf' => new RedisLockingSessionHandler($_SERVER['APP_LEASE_DSN'], ['prefix' => 'sf_s']),
    'redis' => (static function (): RedisSessionHandler {
        $redis = new Redis();
        $redis->connect('127.0.0.1', (int) $_SERVER['APP_REDIS_PORT']);
        return new RedisSessionHandler($redis);
    })(),
    'file' => new NativeFileSessionHandler($_SERVER['APP_FILES']),
};
$requestStack = new RequestStack();
$services = new Services([
    'request_stack' => $requestStack,
    'session_factory' => new SessionFactory($requestStack, new NativeSessionStorageFactory(['cache_limiter' => ''], $handler)),
]);

/** The keys the session race added ("k0".."k99"). */
function race_keys(array $data): array
{
    return array_values(array_filter(array_keys($data), static fn ($k) => preg_match('/^k\d+$/', (string) $k) === 1));
}

$routes = [
    '/put' => static function (Request $r) {
        $r->getSession()->set((string) $r->query->get('key'), (string) $r->query->get('value'));
        return ['id' => $r->getSession()->getId()];
    },
    '/add' => static function (Request $r) {
        $s = $r->getSession();
        $before = count(race_keys($s->all()));
        $s->set((string) $r->query->get('key'), 1);
        return ['id' => $s->getId(), 'count_before' => $before];
    },
    '/read' => static function (Request $r) {
        $all = $r->getSession()->all();
        return ['id' => $r->getSession()->getId(), 'keys' => race_keys($all), 'data' => $all];
    },
    // What Symfony's security does at login: a fresh id, the old session destroyed.
    '/login' => static function (Request $r) {
        $old = $r->getSession()->getId();
        $r->getSession()->set('user', 7);
        $r->getSession()->migrate(true);
        return ['old' => $old, 'id' => $r->getSession()->getId()];
    },
    // What a logout does: the firewall has read the session (the token), then invalidate().
    '/logout' => static function (Request $r) {
        $user = $r->getSession()->get('user');
        $old = $r->getSession()->getId();
        $r->getSession()->invalidate();
        return ['old' => $old, 'id' => $r->getSession()->getId(), 'user_was' => $user];
    },
    // Early save: free the session for the user's other requests, then go on (a later change reopens it).
    '/early' => static function (Request $r) {
        $r->getSession()->set('early', 1);
        $r->getSession()->save();
        $r->getSession()->set('late', 2);
        return ['id' => $r->getSession()->getId()];
    },
];

$dispatcher = new EventDispatcher();
$dispatcher->addSubscriber(new SessionListener($services, true));
$dispatcher->addListener(KernelEvents::REQUEST, static function (RequestEvent $e) use ($routes): void {
    $action = $routes[$e->getRequest()->getPathInfo()] ?? null;
    if ($action !== null) {
        $e->getRequest()->attributes->set('_controller', static fn (Request $r) => new JsonResponse($action($r)));
    }
});
$kernel = new HttpKernel($dispatcher, new ControllerResolver(), $requestStack, new ArgumentResolver());

$request = Request::createFromGlobals();
try {
    $response = $kernel->handle($request);
} catch (Throwable $e) {
    error_log('bridge test app: ' . $e);
    $response = new JsonResponse(['error' => get_class($e) . ': ' . $e->getMessage()], 500);
}
$response->send();
$kernel->terminate($request, $response);
