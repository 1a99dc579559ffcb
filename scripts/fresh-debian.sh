#!/usr/bin/env bash
# The README's set-up on a fresh Debian, checked for real: a minimal bookworm made with debootstrap (Python 3.11
# from Debian), this repository cloned into it, then `make test` (or the target given) as root inside it.
#
#   sudo bash scripts/fresh-debian.sh [/srv/evident-fresh] [make target]
#
# Needs root, debootstrap (installed when missing) and the Debian and PyPI registries. The host's CA bundle
# and pip.conf are copied in: behind a TLS-inspecting proxy, a fresh machine would have them too.
# A second run reuses the chroot (its packages stay installed); delete the folder for a cold run.
set -euo pipefail

root=${1:-/srv/evident-fresh}
target=${2:-test}
repo=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
say() { echo "fresh-debian: [$(($(date +%s) - start)) s] $*" >&2; }

command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
if [[ ! -x $root/usr/bin/apt-get ]]; then
  say "debootstrap bookworm into $root"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  install -D /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  # Installing Debian's ca-certificates below rebuilds that bundle from the certificates it knows, which
  # would drop a proxy's own CA: each host certificate also goes where update-ca-certificates adds it.
  mkdir -p "$root/usr/local/share/ca-certificates/host"
  awk -v dir="$root/usr/local/share/ca-certificates/host" \
    '/BEGIN CERTIFICATE/ {n++; f = sprintf("%s/host-%04d.crt", dir, n)} f {print > f} /END CERTIFICATE/ {close(f); f = ""}' \
    /etc/ssl/certs/ca-certificates.crt
fi
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"

mounted=()
for fs in proc sys dev; do
  if ! mountpoint -q "$root/$fs"; then
    if [[ $fs == proc ]]; then mount -t proc proc "$root/proc"; else mount --rbind "/$fs" "$root/$fs"; fi
    mounted+=("$root/$fs")
  fi
done
cleanup() { for m in "${mounted[@]}"; do umount -R "$m" 2>/dev/null || umount -lR "$m"; done; }
trap cleanup EXIT

in_root() { env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  chroot "$root" /bin/bash -c "$1"; }
# What the README assumes a fresh machine has: Python 3.11 and git to clone; make to run the commands.
in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 make git ca-certificates >/dev/null \
  && update-ca-certificates >/dev/null"
say "base system ready: $(in_root 'python3 --version')"

rm -rf "$root/root/evident"
git clone -q "$repo" "$root/root/evident"
say "make $target"
if in_root "cd /root/evident && make $target"; then say "make $target passed"; else say "make $target FAILED"; exit 1; fi
