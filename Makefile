# Convenience targets; the scripts work without make on a fresh machine.
SO := target/release/libredis_lease.so

.PHONY: build test demo bench valgrind soak phpt cargo-test lint fmt clean

build:
	bash scripts/build.sh

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

# The PHPT suite under valgrind (USE_ZEND_ALLOC=0); slow, not part of .ci/run.
valgrind: build
	bash scripts/valgrind.sh

# 100,000 requests through php-fpm; reports worker RSS after warm-up and at the end.
soak: build
	bash scripts/soak.sh

cargo-test:
	cargo test --no-default-features --locked

phpt: build
	bash scripts/run-phpt.sh $(SO)

lint:
	cargo fmt --check
	cargo clippy --release --locked -- -D warnings
	cargo clippy --no-default-features --tests --locked -- -D warnings
	php -l stubs/redis_lease.stub.php

fmt:
	cargo fmt

clean:
	cargo clean
