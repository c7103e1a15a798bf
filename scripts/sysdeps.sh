#!/usr/bin/env bash
# Installs the system packages the test suite needs, once: OpenSSH server (the SSH tests start their
# own sshd on a loopback port) and Chromium (the HTML report test). Idempotent; needs root to install.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "sysdeps: missing ${need[*]}; run as root or install them (tests that need them skip)" >&2
  exit 0
fi
echo "sysdeps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
