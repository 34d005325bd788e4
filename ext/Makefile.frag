# Appended to the Makefile that phpize's configure writes: `make` runs cargo and
# puts the result where `make install` (and PIE) expect it.

# cargo honours CARGO_TARGET_DIR; so do we.
REDIS_LEASE_TARGET = $(or $(CARGO_TARGET_DIR),$(REDIS_LEASE_CRATE)/target)
REDIS_LEASE_SO = $(REDIS_LEASE_TARGET)/$(REDIS_LEASE_PROFILE)/libredis_lease.so
REDIS_LEASE_SOURCES = $(REDIS_LEASE_CRATE)/Cargo.toml $(REDIS_LEASE_CRATE)/Cargo.lock $(shell find $(REDIS_LEASE_CRATE)/src -type f)

all: modules/redis_lease.so
build-modules: modules/redis_lease.so

modules/redis_lease.so: $(REDIS_LEASE_SOURCES)
	cd $(REDIS_LEASE_CRATE) && PHP_CONFIG=$(REDIS_LEASE_PHP_CONFIG) PHP=$(REDIS_LEASE_PHP) $(CARGO) build --locked $(REDIS_LEASE_CARGO_FLAGS)
	$(mkinstalldirs) modules
	cp $(REDIS_LEASE_SO) $@.tmp
	$(REDIS_LEASE_PHP) -n $(REDIS_LEASE_CRATE)/ext/weaken-zend.php $@.tmp
	mv $@.tmp $@

clean: redis-lease-clean
redis-lease-clean:
	rm -f modules/redis_lease.so
