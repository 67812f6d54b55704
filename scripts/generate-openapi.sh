#!/usr/bin/env bash
# Regenerates the Swift client of the gateway's API (swift-openapi-generator: types and client,
# internal access) from Sources/Gateway/Resources/openapi.yaml into
# Tests/IntegrationTests/GatewayAPIClient/, where GatewayGeneratedClientTests walks a journey
# through it. Run it after every change of openapi.yaml: a unit test (GatewayTests,
# "Generated client") fails while the files' header names another sha256 than the spec's.
#
#   bash scripts/generate-openapi.sh
#
# The generator is built from scripts/openapi-generator (its own package and .build, the version
# pinned there; the first build takes a few minutes). Fails if the generator prints a warning: a
# warning there means a part of the spec the generated code silently lacks (a property skipped).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

spec=Sources/Gateway/Resources/openapi.yaml
out=Tests/IntegrationTests/GatewayAPIClient
tools=scripts/openapi-generator

echo "==> building swift-openapi-generator ($tools)"
swift build --package-path "$tools" --product swift-openapi-generator >/dev/null
generator="$(swift build --package-path "$tools" --show-bin-path)/swift-openapi-generator"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sha=$(sha256sum "$spec" | cut -d' ' -f1)
sed "s/@SPEC_SHA256@/$sha/" "$tools/openapi-generator-config.yaml" >"$work/config.yaml"

echo "==> generating $out from $spec (sha256 $sha)"
"$generator" generate "$spec" --config "$work/config.yaml" --output-directory "$work/out" >"$work/log" 2>&1 || {
    cat "$work/log" >&2
    exit 1
}
if grep -q 'warning:' "$work/log"; then
    grep 'warning:' "$work/log" >&2
    echo "generate-openapi: the generator warned (above): fix openapi.yaml; $out is unchanged" >&2
    exit 1
fi
rm -rf "$out"
mkdir -p "$out"
cp "$work"/out/*.swift "$out/"
wc -l "$out"/*.swift | tail -1 | sed 's/^ */==> /; s/total$/lines generated/'
