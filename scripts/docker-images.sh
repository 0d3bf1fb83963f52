#!/usr/bin/env bash
# Builds the images the built-in Docker stacks need (compose/*.yml), from
# Debian's packages, without any registry: a minimal Debian base made with
# debootstrap and `docker import`, then the small Dockerfiles under
# compose/images/ (apt inside, --network host). The historian image carries
# the scalebench binary given as $1 (default: the release build).
#
#   scripts/docker-images.sh [path/to/scalebench]
#
# Idempotent: an image that exists is kept unless what went into it changed
# (its label records the recipe, the base's id and a checksum of its
# Dockerfile directory, the nats-server or the scalebench binary it
# carries); SCALE_REBUILD=1 rebuilds all. The debootstrap rootfs is cached
# in $SCALE_DOCKER_CACHE (default /var/tmp/scalebench-docker).
#
# The nats image runs Debian's nats-server (2.9), or the newer one
# scripts/setup.sh installs ($SCALEBENCH_PY_DIR/bin/nats-server, 2.10+, which
# knows JetStream's sync_interval) when it is there.
# A user with a registry can point compose files at public images instead
# (SCALE_IMAGE_PREFIX).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-${CARGO_TARGET_DIR:-target}/release/scalebench}"
CACHE="${SCALE_DOCKER_CACHE:-/var/tmp/scalebench-docker}"
# The mirror apt already uses (deb822 `URIs:` or a `deb` line), unless given.
MIRROR="${SCALE_DEBIAN_MIRROR:-$( { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'; grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | grep -v security | head -n1 || true)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$CACHE"

have() { docker image inspect "$1" >/dev/null 2>&1; }
# An image's label, empty when the image or the label is missing.
label_of() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }

# The image a rebuild replaced, by its id, when this script made it (it
# carries the label given): removed, so rebuilds leave nothing dangling
# (under vfs each is a few hundred MB). One still in use by a container
# stays.
replaced() {
  local old="$1" tag="$2" label="$3"
  [ -n "$old" ] || return 0
  [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)" ] || return 0
  [ -n "$(label_of "$old" "$label")" ] || return 0
  docker image rm "$old" >/dev/null 2>&1 || true
}

# The recipe of the slim base and of every image on it: bumped when either
# changes, so an engine holding images of an older recipe rebuilds them.
# Each image's `scale.recipe` label holds the recipe and its base's id.
RECIPE=2
recipe_of() { label_of "$1" scale.recipe; }

if [ ! -f "$CACHE/rootfs.tar" ]; then
  echo "images: debootstrap bookworm (minbase) from $MIRROR" >&2
  rm -rf "$CACHE/rootfs.tmp"
  debootstrap --variant=minbase bookworm "$CACHE/rootfs.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { echo "images: debootstrap failed, see $CACHE/debootstrap.log" >&2; exit 1; }
  tar -C "$CACHE/rootfs.tmp" -c . >"$CACHE/rootfs.tar.tmp" && mv "$CACHE/rootfs.tar.tmp" "$CACHE/rootfs.tar"
  rm -rf "$CACHE/rootfs.tmp"
fi
# The base without what no container reads: the engine's vfs driver copies
# an image's whole tree twice into every container it creates (its init
# layer, then its own), so each MB here is written twice per service per
# stack start. Gone: downloaded packages and apt's caches (debootstrap
# leaves 32 MB of .deb files), documentation, manuals and translations;
# dpkg and apt are told to keep them out of every image built on it, as
# Debian's own container images do.
if [ "$(recipe_of scale-base:bookworm)" != "$RECIPE" ] || [ "${SCALE_REBUILD:-0}" = 1 ]; then
  echo "images: scale-base:bookworm (recipe $RECIPE)" >&2
  old=$(docker image inspect -f '{{.Id}}' scale-base:bookworm 2>/dev/null || true)
  slim=$(mktemp -d "$CACHE/slim.XXXXXX")
  tar -C "$slim" -xf "$CACHE/rootfs.tar"
  rm -rf "$slim"/var/cache/apt/archives/*.deb "$slim"/var/cache/apt/*.bin "$slim"/var/lib/apt/lists/* \
    "$slim"/usr/share/doc/* "$slim"/usr/share/man/* "$slim"/usr/share/info/*
  find "$slim/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  cat >"$slim/etc/dpkg/dpkg.cfg.d/scale-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
CFG
  cat >"$slim/etc/apt/apt.conf.d/scale-slim" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
CFG
  tar -C "$slim" -c . | docker import --change "LABEL scale.recipe=$RECIPE" - scale-base:bookworm >/dev/null
  rm -rf "$slim"
  replaced "$old" scale-base:bookworm scale.recipe
fi
BASE="$RECIPE-$(docker image inspect -f '{{.Id}}' scale-base:bookworm | sed 's/^sha256://' | cut -c1-12)"

for name in mosquitto postgres; do
  ctx_sum=$(cd "compose/images/$name" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
  if [ "$(recipe_of "scale-$name:bookworm")" != "$BASE-$ctx_sum" ] || [ "${SCALE_REBUILD:-0}" = 1 ]; then
    echo "images: scale-$name:bookworm" >&2
    old=$(docker image inspect -f '{{.Id}}' "scale-$name:bookworm" 2>/dev/null || true)
    docker build -q --network host --label "scale.recipe=$BASE-$ctx_sum" -t "scale-$name:bookworm" "compose/images/$name" >/dev/null
    replaced "$old" "scale-$name:bookworm" scale.recipe
  fi
done

# nats: Debian's server, with the newer static binary over it when setup
# installed one; the label holds the checksum of what went in (Dockerfile,
# entrypoint, binary), so a new binary or entrypoint rebuilds the image.
NATS_BIN="${SCALEBENCH_PY_DIR:-/var/tmp/scalebench-py}/bin/nats-server"
ctx=$(mktemp -d)
cp compose/images/nats/Dockerfile compose/images/nats/entrypoint.sh "$ctx/"
mkdir "$ctx/extra"
nats_from="Debian's nats-server"
if [ -x "$NATS_BIN" ] && "$NATS_BIN" --version >/dev/null 2>&1; then
  cp "$NATS_BIN" "$ctx/extra/nats-server"
  nats_from="$("$NATS_BIN" --version) from $NATS_BIN"
fi
# Never an empty directory: the legacy builder fails to export an empty COPY layer.
echo "$nats_from" >"$ctx/extra/source"
nats_sum=$BASE-$(cd "$ctx" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
if [ "$(label_of scale-nats:bookworm scale.context)" != "$nats_sum" ] \
  || [ "${SCALE_REBUILD:-0}" = 1 ]; then
  echo "images: scale-nats:bookworm ($nats_from)" >&2
  old=$(docker image inspect -f '{{.Id}}' scale-nats:bookworm 2>/dev/null || true)
  docker build -q --network host --label "scale.context=$nats_sum" -t scale-nats:bookworm "$ctx" >/dev/null
  replaced "$old" scale-nats:bookworm scale.context
fi
rm -rf "$ctx"

if [ ! -x "$BIN" ]; then
  echo "images: no scalebench binary at $BIN (build it: cargo build --release -p scalebench)" >&2
  exit 1
fi
sum=$BASE-$(sha256sum "$BIN" | cut -c1-16)
# Images that carry the scalebench binary: the historian, the Haystack test
# server, the distributed-run worker.
for name in historian haystack worker; do
  if [ "$(label_of "scale-$name:bookworm" scale.binary)" != "$sum" ]; then
    echo "images: scale-$name:bookworm (scalebench $sum)" >&2
    ctx=$(mktemp -d)
    cp "compose/images/$name/Dockerfile" "$ctx/"
    # The historian's and the test server's without debug sections (148 MB
    # to 64 MB: the engine's vfs driver copies the image into every
    # container it starts); the worker's as built, byte for byte, since a
    # coordinator admits only workers whose binary hashes as its own.
    if [ "$name" != worker ] && strip --strip-debug -o "$ctx/scalebench" "$BIN" 2>/dev/null; then :; else
      cp "$BIN" "$ctx/scalebench"
    fi
    old=$(docker image inspect -f '{{.Id}}' "scale-$name:bookworm" 2>/dev/null || true)
    docker build -q --network host --label "scale.binary=$sum" -t "scale-$name:bookworm" "$ctx" >/dev/null
    replaced "$old" "scale-$name:bookworm" scale.binary
    rm -rf "$ctx"
  fi
done
echo "images: ready" >&2
