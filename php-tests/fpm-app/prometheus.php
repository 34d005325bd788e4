<?php
// The scrape endpoint a user would serve: every worker's metrics, Prometheus text format.
header('Content-Type: text/plain; version=0.0.4');
echo RedisLease\prometheus_metrics();
