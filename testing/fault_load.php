<?php
/*
 * A steady FastCGI load for the fault tests: keeps `concurrency` requests in
 * flight against a php-fpm pool (more than its workers, so some always queue),
 * starting a new one whenever one ends, and records every outcome.
 *
 *   $load = new FaultLoad($pool->client(), 16, fn(int $n) => [$params, $meta], 5.0);
 *   $load->runCount(100);             // until 100 more requests have ended
 *   $load->runFor(1.0, 200);          // for 1 s (or 200 requests, if sooner)
 *   ... inject a fault: requests are still in flight meanwhile ...
 *   $load->drain(10.0);               // stop starting new ones; wait for the rest
 *   foreach ($load->results as $r) { $r['meta'], $r['response'] (FcgiResponse), $r['n'] }
 *
 * Every request is bounded: one that has not ended `requestTimeout` seconds
 * after it began is cut off and recorded with error "no answer within ...",
 * which the tests count as a hung worker.
 */

require_once __DIR__ . '/fcgi_client.php';

final class FaultLoad
{
    /** Ended requests, in the order they ended: ['n' => int, 'meta' => mixed, 'response' => FcgiResponse]. */
    public array $results = [];
    /** Requests begun so far. */
    public int $begun = 0;
    /** @var array<int, array{call: FcgiCall, meta: mixed}> in flight, by request number */
    private array $active = [];

    /**
     * @param callable(int): array{0: array, 1: mixed} $next FastCGI params and
     *        caller data (kept in the result) of request number $n
     */
    public function __construct(
        private FcgiClient $client,
        private int $concurrency,
        private $next,
        private float $requestTimeout,
    ) {
    }

    /** Keep the load going until $n more requests have ended (or $maxSeconds passed). */
    public function runCount(int $n, float $maxSeconds = 30.0): bool
    {
        $target = count($this->results) + $n;
        return $this->run(fn() => count($this->results) >= $target, $maxSeconds);
    }

    /** Keep the load going for $seconds, or until $maxRequests more have ended. */
    public function runFor(float $seconds, int $maxRequests = PHP_INT_MAX): void
    {
        $target = count($this->results) + $maxRequests;
        $this->run(fn() => count($this->results) >= $target, $seconds);
    }

    /** Start no new request; wait (bounded) until those in flight have ended. */
    public function drain(float $timeout): bool
    {
        $deadline = microtime(true) + $timeout;
        while ($this->active !== [] && microtime(true) < $deadline) {
            $this->step(false);
        }
        return $this->active === [];
    }

    public function inFlight(): int
    {
        return count($this->active);
    }

    /** Seconds the oldest request in flight has been running (0 when none), for diagnostics. */
    public function oldestInFlight(): float
    {
        $oldest = 0.0;
        foreach ($this->active as $a) {
            $oldest = max($oldest, microtime(true) - $a['call']->response->started);
        }
        return $oldest;
    }

    /** Run until $done() or $maxSeconds; true when $done() was reached. */
    private function run(callable $done, float $maxSeconds): bool
    {
        $deadline = microtime(true) + $maxSeconds;
        while (!$done()) {
            if (microtime(true) >= $deadline) {
                return false;
            }
            $this->step(true);
        }
        return true;
    }

    /** Top up to the concurrency (when $start), move bytes for up to 5 ms, collect what ended. */
    private function step(bool $start): void
    {
        while ($start && count($this->active) < $this->concurrency) {
            $n = $this->begun++;
            [$params, $meta] = ($this->next)($n);
            $this->active[$n] = ['call' => $this->client->begin($params), 'meta' => $meta];
        }
        $calls = array_column($this->active, 'call');
        if ($calls !== []) {
            FcgiClient::pump($calls, 0.005);
        }
        $now = microtime(true);
        foreach ($this->active as $n => $a) {
            $call = $a['call'];
            if (!$call->done && $now - $call->response->started > $this->requestTimeout) {
                $call->finish(sprintf('no answer within %.1f s', $this->requestTimeout));
            }
            if ($call->done) {
                $this->results[] = ['n' => $n, 'meta' => $a['meta'], 'response' => $call->response];
                unset($this->active[$n]);
            }
        }
    }
}
