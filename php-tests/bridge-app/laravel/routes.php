<?php
// Routes of the test application; each answers JSON. Parameters come in the query string.

use Illuminate\Http\Request;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Route;

/** The keys the session race added ("k0".."k99"), in a session's data. */
function bridge_race_keys(array $data): array
{
    return array_values(array_filter(array_keys($data), static fn ($k) => preg_match('/^k\d+$/', (string) $k) === 1));
}

Route::get('/info', function () {
    return [
        'laravel' => app()->version(),
        'discovered' => app(Illuminate\Foundation\PackageManifest::class)->providers(),
        'loaded' => array_keys(app()->getLoadedProviders()),
        'handler' => get_class(session()->getHandler()),
    ];
});

// --- sessions ---
Route::get('/session/add', function (Request $r) {
    $s = $r->session();
    $before = count(bridge_race_keys($s->all()));
    usleep((int) $r->query('work_ms', 0) * 1000); // the request's own work, not synchronization
    $s->put((string) $r->query('key'), 1);
    return ['id' => $s->getId(), 'count_before' => $before, 'pid' => getmypid()];
});
Route::get('/session/read', function (Request $r) {
    return ['id' => $r->session()->getId(), 'keys' => bridge_race_keys($r->session()->all()), 'data' => $r->session()->all()];
});
Route::get('/session/put', function (Request $r) {
    $r->session()->put((string) $r->query('key'), (string) $r->query('value'));
    return ['id' => $r->session()->getId()];
});
// What Auth::login() does to the session: a fresh id, the old one destroyed.
Route::get('/session/login', function (Request $r) {
    $old = $r->session()->getId();
    $r->session()->put('user', 7);
    $r->session()->migrate(true);
    return ['old' => $old, 'id' => $r->session()->getId()];
});
// What a logout route does: everything cleared, a fresh id.
Route::get('/session/logout', function (Request $r) {
    $old = $r->session()->getId();
    $r->session()->invalidate();
    return ['old' => $old, 'id' => $r->session()->getId()];
});
Route::get('/session/regenerate', function (Request $r) {
    $old = $r->session()->getId();
    $r->session()->put('regenerated', true);
    $r->session()->regenerate();
    return ['old' => $old, 'id' => $r->session()->getId()];
});
// Early save: free the session for the user's other requests, then go on (StartSession saves again).
Route::get('/session/early', function (Request $r) {
    $r->session()->put('early', 1);
    $r->session()->save();
    $r->session()->put('late', 2);
    return ['id' => $r->session()->getId()];
});

// --- locks; `store` picks the cache store: leases (redis_lease) or redis (Laravel's own) ---
Route::get('/lock/counter', function (Request $r) {
    $file = (string) $r->query('file');
    return Cache::store((string) $r->query('store'))->lock('counter', 10)->block(30, function () use ($file) {
        // A read-modify-write that loses increments unless the lock serializes it.
        $n = (int) file_get_contents($file);
        usleep(1000);
        file_put_contents($file, (string) ($n + 1));
        return ['n' => $n + 1, 'pid' => getmypid()];
    });
});
Route::get('/lock/get', function (Request $r) {
    $lock = Cache::store('leases')->lock((string) $r->query('name'), (int) $r->query('seconds', 0));
    return ['got' => $lock->get(), 'owner' => $lock->owner()];
});
Route::get('/lock/block', function (Request $r) {
    $lock = Cache::store('leases')->lock((string) $r->query('name'), (int) $r->query('seconds', 0));
    $lock->block((int) $r->query('wait'));
    return ['got' => true, 'owner' => $lock->owner(), 'at' => microtime(true)];
});
Route::get('/lock/release', function (Request $r) {
    return ['released' => Cache::store('leases')->restoreLock((string) $r->query('name'), (string) $r->query('owner'))->release()];
});
Route::get('/lock/force', function (Request $r) {
    Cache::store('leases')->lock((string) $r->query('name'))->forceRelease();
    return ['at' => microtime(true)];
});
// Route::block(): StartSession takes the lock "session:<id>" from session.block_store (leases) around
// the request. With Laravel's file session driver, that lock is all that serializes them.
Route::get('/blocked', function (Request $r) {
    $r->session()->put((string) $r->query('key'), 1);
    return ['id' => $r->session()->getId()];
})->block(10, 20);
// Cache::funnel() (Laravel 12.53+) on `store`: at most `limit` requests inside at once. Inside, each
// counts itself in and out of a Redis counter (its own connection), so the test sees how many were
// inside together.
Route::get('/lock/funnel', function (Request $r) {
    $redis = new \Redis();
    $redis->connect('127.0.0.1', (int) env('APP_REDIS_PORT'));
    $counter = 'funnel-inside:' . $r->query('store');
    return Cache::store((string) $r->query('store'))->funnel('hammer')->limit((int) $r->query('limit'))
        ->releaseAfter(30)->block(60)->then(function () use ($redis, $counter, $r) {
            $inside = $redis->incr($counter);
            usleep((int) $r->query('work_ms') * 1000); // the request's work, not synchronization
            $redis->decr($counter);
            return ['inside' => $inside, 'pid' => getmypid()];
        });
});
