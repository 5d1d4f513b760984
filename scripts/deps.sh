#!/usr/bin/env bash
# Installs the Go tools CI needs (staticcheck, pinned, into the project's
# bin/, so no root and no global GOBIN is needed), then what the end-to-end
# tests need from Debian's packages, when missing and when running as root.
# Without root it only reports which packages are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# staticcheck only understands Go versions up to the one its release was
# made for; v0.8.2 (release 2026.2.2) builds and runs with Go 1.26.
staticcheck_version=v0.8.2
if ! bin/staticcheck -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
  GOBIN="$PWD/bin" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@${staticcheck_version}"
fi

need=()
command -v wg >/dev/null 2>&1 || need+=(wireguard-tools)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ncat >/dev/null 2>&1 || need+=(ncat)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v ndpiReader >/dev/null 2>&1 || need+=(libndpi-bin)
command -v tinyproxy >/dev/null 2>&1 || need+=(tinyproxy)
command -v resolvconf >/dev/null 2>&1 || true
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: not root; end-to-end tests will skip for lack of: ${need[*]}" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
