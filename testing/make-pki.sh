#!/usr/bin/env bash
# A throwaway PKI for the TLS tests, made with openssl at test time:
#
#   testing/make-pki.sh DIR
#
# writes into DIR (P-256 keys, PEM):
#   ca.pem                  the test CA (what clients give as cafile)
#   server.pem/.key         localhost and 127.0.0.1, signed by the CA
#   wronghost.pem/.key      only other.example: a host name mismatch for localhost
#   expired.pem/.key        localhost, valid only in 2020
#   client.pem/.key         a client certificate (mutual TLS), signed by the CA
#   other-ca.pem            a CA that signed none of them (a wrong cafile)
# Idempotent: an existing DIR/ca.pem is kept as is.
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
[[ -f ca.pem ]] && exit 0
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
key ca
openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=redis_lease test CA" 2>/dev/null
key other-ca
openssl req -x509 -new -key other-ca.key -out other-ca.pem -days 30 -subj "/CN=another CA" 2>/dev/null

# openssl ca, for the dates openssl x509 -req cannot set.
mkdir -p ca.db
: > ca.db/index.txt
echo 1000 > ca.db/serial
cat > ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = .
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[any]
commonName = supplied
CNF
# issue NAME CN EXTENSIONS [startdate enddate]
issue() {
    local name=$1 cn=$2 ext=$3
    key "$name"
    openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
    printf '%s\n' "$ext" > "$name.ext"
    local dates=(-days 30)
    [[ $# -ge 5 ]] && dates=(-startdate "$4" -enddate "$5")
    openssl ca -batch -config ca.cnf -in "$name.csr" -out "$name.pem" -notext \
        -extfile "$name.ext" "${dates[@]}" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}
issue server localhost $'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth'
issue wronghost other.example $'subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth'
issue expired localhost $'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth' \
    20200101000000Z 20200201000000Z
issue client redis_lease-client 'extendedKeyUsage=clientAuth'
