#!/usr/bin/env bash
# Build the lab's node base image from Debian's archive: debootstrap + docker import.
# No container registry is reachable, so nothing is pulled.
#   build.sh <image:tag> <debian mirror URL>
# Called by lab/spark_lab.py when no image carries the tag (the tag is a hash of this
# directory, so editing the recipe rebuilds it).
set -euo pipefail

tag=$1
mirror=$2
suite=bookworm
here=$(cd "$(dirname "$0")" && pwd)
packages=$(grep -v '^\s*#' "$here/packages.txt" | grep -v '^\s*$' | paste -sd, -)

work=$(mktemp -d /var/tmp/glm53-lab-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs

echo "debootstrap $suite from $mirror (minbase + $(echo "$packages" | tr ',' ' ' | wc -w) packages)"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "debootstrap failed (full log above was $work/debootstrap.log)" >&2
  exit 1
}

# Weight we never read inside a node: package caches, lists, docs, man pages, locales.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
# Each node makes its own SSH host keys at first boot (glm53-lab-hostkeys.service);
# keys baked here would be shared by both nodes.
rm -f "$root"/etc/ssh/ssh_host_*
# Container-managed files: Docker bind-mounts its own.
: >"$root"/etc/hostname
# machine-id is made at first boot, distinct per node.
: >"$root"/etc/machine-id

tar --numeric-owner --xattrs -C "$root" -c . |
  docker import \
    --change 'LABEL glm53-lab=1' \
    --change 'ENV container=docker' \
    --change 'CMD ["/sbin/init"]' \
    - "$tag" >/dev/null
echo "imported $tag"
