<?php
// ApachePool's readiness probe: which PHP answers, and how.
header('Content-Type: application/json');
echo json_encode(['zts' => (bool) PHP_ZTS, 'sapi' => PHP_SAPI, 'redis_lease' => extension_loaded('redis_lease')]);
