#!/usr/bin/env bash
# Re-vendors the client's one dependency reproducibly: htm's standalone
# Preact build (Preact, its hooks and htm in one ES module), fetched from the
# npm registry at a pinned version and checked against the registry's
# integrity hash. Run from anywhere; it rewrites web/static/vendor/.
set -euo pipefail
cd "$(dirname "$0")/static"

htm_version=3.1.1
preact_version=10.6.6
htm_integrity=sha512-983Vyg8NwUE7JkZ6NmOqpCZ+sh1bKv2iYTlUkzlWmA5JD2acKoxd4KVxbMmxX/85mtfdnDmTFoNKcg5DGAvxNQ==

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$(npm pack --silent --pack-destination "$work" "htm@$htm_version")
got="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w0)"
if [ "$got" != "$htm_integrity" ]; then
  echo "vendor.sh: htm@$htm_version does not match its pinned integrity ($got)" >&2
  exit 1
fi
tar -xzf "$work/$tarball" -C "$work"
rm -rf vendor
mkdir -p vendor
cp "$work/package/preact/standalone.module.js" vendor/preact-htm.js
cp "$work/package/LICENSE" vendor/LICENSE-htm
# Preact's MIT licence (the bundled Preact 10 carries the same text).
preact_tarball=$(npm pack --silent --pack-destination "$work" "preact@$preact_version")
mkdir -p "$work/preact"
tar -xzf "$work/$preact_tarball" -C "$work/preact"
cp "$work/preact/package/LICENSE" vendor/LICENSE-preact
printf 'htm@%s preact/standalone.module.js (Preact and its hooks bundled in: MIT, see LICENSE-preact)\n' "$htm_version" > vendor/VERSIONS
