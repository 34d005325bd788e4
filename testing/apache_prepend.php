<?php
// ApachePool's auto_prepend_file: the test's own params (X-Rl-Param-* headers,
// base64) become $_SERVER entries, as FastCGI params do under php-fpm.
foreach ($_SERVER as $name => $value) {
    if (is_string($value) && str_starts_with($name, 'HTTP_X_RL_PARAM_')) {
        $_SERVER[substr($name, 16)] = base64_decode($value, true);
        unset($_SERVER[$name]);
    }
}
