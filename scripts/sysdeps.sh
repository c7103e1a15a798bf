#!/usr/bin/env bash
# Installs the system packages the test suite needs, once: OpenSSH server (the SSH tests start their
# own sshd on a loopback port), Chromium (the HTML report test), Prometheus (the telemetry tests run
# it as a plain process with their own config, storage and loopback port; no service is enabled)
# systemd (the unit tests run a private systemd as PID 1 of its own namespaces,
# tests/support/systemd.py; nothing is enabled or started on the host), and nginx and HAProxy (the
# proxy tests run each as a plain foreground process with its own config, pid, log and temporary
# paths, tests/support/proxies.py; the packages' services are never started by the tests), and
# tinyproxy (the forward proxy tests run it the same way, tests/support/forward.py), and Varnish
# (the total-response timeout class of the proxy tests, run the same way as nginx).
# Idempotent; needs root to install.
#
# Exit status: 0 when everything is there (or installed), and for a developer without root who
# lacks something (those tests skip, with a reason). Non-zero in CI (CI set) or as root when
# something is missing and cannot be installed: there the SSH, browser, Prometheus, systemd and
# proxy tests must run, and `make test` stops here instead of letting them skip.
#
# SYSDEPS_SSHD, SYSDEPS_CHROMIUM, SYSDEPS_PROMETHEUS, SYSDEPS_SYSTEMD, SYSDEPS_NGINX,
# SYSDEPS_HAPROXY, SYSDEPS_TINYPROXY and SYSDEPS_VARNISH name the programs looked for (defaults
# /usr/sbin/sshd, chromium, prometheus, /lib/systemd/systemd, /usr/sbin/nginx, /usr/sbin/haproxy,
# /usr/bin/tinyproxy and /usr/sbin/varnishd); tests/test_sysdeps.py uses them.
set -euo pipefail
sshd=${SYSDEPS_SSHD:-/usr/sbin/sshd}
chromium=${SYSDEPS_CHROMIUM:-chromium}
systemd=${SYSDEPS_SYSTEMD:-/lib/systemd/systemd}
prometheus=${SYSDEPS_PROMETHEUS:-prometheus}
nginx=${SYSDEPS_NGINX:-/usr/sbin/nginx}
haproxy=${SYSDEPS_HAPROXY:-/usr/sbin/haproxy}
tinyproxy=${SYSDEPS_TINYPROXY:-/usr/bin/tinyproxy}
varnish=${SYSDEPS_VARNISH:-/usr/sbin/varnishd}

missing() {
  local need=()
  [ -x "$sshd" ] || need+=(openssh-server)
  command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
  command -v "$chromium" >/dev/null 2>&1 || need+=(chromium)
  command -v "$prometheus" >/dev/null 2>&1 || need+=(prometheus)
  [ -x "$systemd" ] || need+=(systemd)
  [ -x "$nginx" ] || need+=(nginx)
  [ -x "$haproxy" ] || need+=(haproxy)
  [ -x "$tinyproxy" ] || need+=(tinyproxy)
  [ -x "$varnish" ] || need+=(varnish)
  echo "${need[*]}"
}

ci_set() {
  case "$(echo "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
    "" | 0 | false | no | off) return 1 ;;
    *) return 0 ;;
  esac
}

read -r -a need <<<"$(missing)"
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  if ci_set; then
    echo "sysdeps: missing ${need[*]} and not root: CI is set, so the tests that need them" \
      "would fail; install them (run this script as root)" >&2
    exit 1
  fi
  echo "sysdeps: missing ${need[*]}; run as root or install them (tests that need them skip)" >&2
  exit 0
fi
echo "sysdeps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/dev/null && \
       apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
  echo "sysdeps: installing ${need[*]} failed (apt-get);" \
    "the SSH, browser, Prometheus, systemd and proxy tests cannot run" >&2
  exit 1
fi
read -r -a still <<<"$(missing)"
if [ ${#still[@]} -ne 0 ]; then
  echo "sysdeps: ${still[*]} still missing after the install" \
    "($sshd, $chromium, $prometheus, $systemd, $nginx, $haproxy, $tinyproxy, $varnish);" \
    "the SSH, browser, Prometheus, systemd and proxy tests cannot run" >&2
  exit 1
fi
