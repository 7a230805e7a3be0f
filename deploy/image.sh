#!/usr/bin/env bash
# deploy/image.sh TAG: builds the container image petstore:TAG from this
# checkout, with podman (docker where podman is missing), pulling nothing:
# the static binary is built here first, then copied into an image FROM
# scratch by the Containerfile at the repository's root.
#
# ARCHES="amd64 arm64" deploy/image.sh TAG builds one image for each, named
# petstore:TAG-amd64 and petstore:TAG-arm64; with podman, petstore:TAG is
# then a manifest list of them. ARCHES defaults to this machine's.
# docs/production.md, "In a container", says how to run the image.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: deploy/image.sh TAG  (ARCHES=\"amd64 arm64\" for several)" >&2
  exit 2
fi
tag=$1
arches=${ARCHES:-$(go env GOARCH)}
engine=${PETSTORE_IMAGE_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null; then engine=docker
  else echo "deploy/image.sh: neither podman nor docker is installed (apt-get install podman)" >&2; exit 1
  fi
fi
roots=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ ! -s "$roots" ]; then
  echo "deploy/image.sh: no CA roots at $roots (apt-get install ca-certificates, or set SSL_CERT_FILE)" >&2
  exit 1
fi

context=$(mktemp -d -t petstore-image-XXXXXX)
trap 'rm -rf "$context"' EXIT
mkdir "$context/data"
cp "$roots" "$context/ca-certificates.crt"

# Go stamps the commit into the binary only where .git is a directory; a
# git worktree's .git is a file, so a clean worktree is built from a clone
# of its HEAD instead (one with changes is built as it is, its revision
# unknown).
src=.
if [ -f .git ]; then
  if [ -z "$(git status --porcelain)" ]; then
    src=$context/src
    git clone --quiet --shared --no-checkout . "$src"
    git -C "$src" checkout --quiet --detach "$(git rev-parse HEAD)"
  else
    echo "deploy/image.sh: a git worktree with changes: its binary cannot name its commit" >&2
  fi
fi
for arch in $arches; do
  # Static, with the module's version and the VCS revision stamped in
  # (petstore version reads them back), and no paths of this machine.
  (cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -tags grpcnotrace -trimpath -buildvcs=auto -ldflags='-s -w' \
    -o "$context/petstore-linux-$arch" .)
done

# The labels say what the binary says of itself.
first=$(set -- $arches; echo "$1")
buildinfo=$(go version -m "$context/petstore-linux-$first")
version=$(awk '$1 == "mod" { print $3; exit }' <<<"$buildinfo")
revision=$(awk '$1 == "build" && $2 ~ /^vcs.revision=/ { sub(/^vcs.revision=/, "", $2); print $2 }' <<<"$buildinfo")
if grep -q 'vcs.modified=true' <<<"$buildinfo"; then revision=${revision:-unknown}+dirty; fi
source=${PETSTORE_IMAGE_SOURCE:-$(git config --get remote.origin.url || echo unknown)}

build() { # arch name
  local format=()
  # Podman's default OCI format has no HEALTHCHECK: keep Docker's. Its
  # cache of intermediate images would only pile up: every build copies
  # a new binary.
  [ "$engine" = podman ] && format=(--format docker --layers=false)
  # TARGETARCH too, for docker's builder without BuildKit, which sets none.
  "$engine" build "${format[@]}" --platform "linux/$1" -t "$2" -f Containerfile \
    --build-arg "TARGETARCH=$1" --build-arg "SOURCE=$source" --build-arg "VERSION=${version:-unknown}" \
    --build-arg "REVISION=${revision:-unknown}" "$context"
}

set -- $arches
if [ $# -eq 1 ]; then
  build "$1" "petstore:$tag"
  echo "built petstore:$tag (linux/$1, $version, $revision)"
  exit 0
fi
for arch in $arches; do
  build "$arch" "petstore:$tag-$arch"
done
if [ "$engine" = podman ]; then
  podman manifest rm "petstore:$tag" >/dev/null 2>&1 || true
  podman manifest create "petstore:$tag" >/dev/null
  for arch in $arches; do
    podman manifest add "petstore:$tag" "containers-storage:localhost/petstore:$tag-$arch" >/dev/null
  done
fi
echo "built $(printf 'petstore:%s-%s ' $(for a in $arches; do echo "$tag $a"; done))($version, $revision)"
