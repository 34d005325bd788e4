# Convenience targets; the scripts work without make on a fresh machine.
SO := target/release/libredis_lease.so

.PHONY: build test demo bench phpt cargo-test lint fmt clean

build:
	bash scripts/build.sh

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

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
