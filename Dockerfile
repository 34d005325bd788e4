# syntax=docker/dockerfile:1
# redis_lease on the official php-fpm image. Build:
#   docker build --build-arg PHP_VERSION=8.2 -t php-fpm-redis-lease .
# The extension is compiled against the same image's PHP headers, through the
# phpize/configure/make route that PIE and PECL use (ext/config.m4).

ARG PHP_VERSION=8.2

FROM php:${PHP_VERSION}-fpm-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# clang/libclang: ext-php-rs reads PHP's headers with bindgen.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates clang curl libclang-dev \
    && rm -rf /var/lib/apt/lists/*
# CC: zstd's C library (session compression) is compiled with the same clang.
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:$PATH CC=clang
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
    | sh -s -- -y --profile minimal --default-toolchain 1.88.0
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY ext ./ext
WORKDIR /src/ext
RUN phpize \
    && ./configure \
    && make -j"$(nproc)" \
    && cp modules/redis_lease.so /redis_lease.so

FROM php:${PHP_VERSION}-fpm-bookworm
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /redis_lease.so /tmp/redis_lease.so
RUN mv /tmp/redis_lease.so "$(php-config --extension-dir)/redis_lease.so" \
    && docker-php-ext-enable redis_lease \
    && php -m | grep -x redis_lease >/dev/null \
    && php --ri redis_lease
