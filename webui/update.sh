#!/usr/bin/env bash
# Replaces the Swagger UI that GET /docs serves (webui/swagger-ui/, embedded in
# the binary) with VERSION of the npm package swagger-ui-dist:
#
#   webui/update.sh 5.35.0
#
# Only the files the page loads are kept, with the package's licence and
# notices beside them, and VERSION records which release they are. npm checks
# the tarball against the registry's integrity hash. Then run
# `go test -run Docs .` (PETSTORE_TEST_BROWSER=1 for the browser test) and
# commit webui/swagger-ui/.
set -euo pipefail
version=${1:?usage: webui/update.sh VERSION (of swagger-ui-dist on npm, such as 5.35.0)}
cd "$(dirname "$0")"

files=(swagger-ui-bundle.js swagger-ui.css favicon-32x32.png favicon-16x16.png
       LICENSE NOTICE swagger-ui-bundle.js.LICENSE.txt)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tarball=$(cd "$tmp" && npm pack --silent "swagger-ui-dist@$version" | tail -n 1)
tar -xzf "$tmp/$tarball" -C "$tmp"
got=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$tmp/package/package.json")
if [ "$got" != "$version" ]; then
  echo "npm gave swagger-ui-dist $got, not $version" >&2
  exit 1
fi

rm -rf swagger-ui.new
mkdir swagger-ui.new
for f in "${files[@]}"; do
  if [ ! -f "$tmp/package/$f" ]; then
    echo "swagger-ui-dist $version has no $f: look at what the release ships and update this script" >&2
    rm -rf swagger-ui.new
    exit 1
  fi
  cp "$tmp/package/$f" swagger-ui.new/
done
echo "$version" >swagger-ui.new/VERSION
rm -rf swagger-ui
mv swagger-ui.new swagger-ui
echo "webui/swagger-ui/ now holds swagger-ui-dist $version ($(du -sh swagger-ui | cut -f1)):"
ls -l swagger-ui
