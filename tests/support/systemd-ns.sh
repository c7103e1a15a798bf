#!/usr/bin/env bash
# A private systemd for the tests: PID 1 of its own PID, mount, UTS, IPC and cgroup namespaces,
# sharing only the network (loopback) with the host. Started by tests/support/systemd.py.
#
#   systemd-ns.sh outer CGROUP DIR SHARE   move into cgroup v2 directory CGROUP, then unshare and
#                                          run the inner stage as the new namespaces' PID 1
#   systemd-ns.sh inner DIR SHARE          (internal) build the private view, exec systemd
#
# DIR holds the units (DIR/units, the only unit directory: SYSTEMD_UNIT_PATH), system.conf,
# machine-id and systemd.log. SHARE (a directory holding DIR) stays shared and writable at the
# same path; everything else the namespace sees of the host is read-only, and /run, /tmp,
# /var/tmp, /dev, /sys/fs/cgroup and the generator directories are private and empty. No unit
# but DIR's exists, so no tmpfiles, journald or udev: nothing touches the host's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

if [ "${1:-}" = outer ]; then
  cgroup=$2 dir=$3 share=$4
  echo $$ >"$cgroup/cgroup.procs"
  # --kill-child: when unshare dies (the tests stop it, or pytest dies and takes it along through
  # the parent-death signal below), the kernel kills the whole PID namespace.
  exec setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child=SIGKILL --mount \
    --propagation private --mount-proc --uts --ipc --cgroup -- "$here" inner "$dir" "$share"
fi
[ "${1:-}" = inner ] || { echo "usage: $0 outer CGROUP DIR SHARE" >&2; exit 2; }
dir=$2 share=$3

# SHARE survives the read-only root and the private /tmp: parked on a private /run, put back.
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir /run/servelab-share
mount --bind "$share" /run/servelab-share
mount -o remount,bind,ro /
for private in /tmp /var/tmp; do mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$private"; done
for empty in /usr/lib/systemd/system-generators /usr/lib/systemd/system-environment-generators; do
  if [ -d "$empty" ]; then mount -t tmpfs -o mode=755,ro tmpfs "$empty"; fi
done
mkdir -p "$share"
mount --move /run/servelab-share "$share"

# A private /dev: the usual nodes (bound from the host's), its own pts instance and shm.
mkdir /run/servelab-dev
mount -t tmpfs -o mode=755,nosuid tmpfs /run/servelab-dev
for node in null zero full random urandom tty; do
  touch "/run/servelab-dev/$node"
  mount --bind "/dev/$node" "/run/servelab-dev/$node"
done
mkdir /run/servelab-dev/pts /run/servelab-dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /run/servelab-dev/pts
ln -s pts/ptmx /run/servelab-dev/ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /run/servelab-dev/shm
ln -s /proc/self/fd /run/servelab-dev/fd
for fd in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${fd%%:*}" "/run/servelab-dev/${fd#*:}"; done
mount --move /run/servelab-dev /dev

# Its own cgroup tree: the cgroup namespace's root is CGROUP (cgroup v2, no controllers).
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
mount --bind "$dir/system.conf" /etc/systemd/system.conf
mount --bind "$dir/machine-id" /etc/machine-id
hostname servelab-systemd

exec env -i container=servelab-tests SYSTEMD_UNIT_PATH="$dir/units" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  /lib/systemd/systemd --system --unit=servelab-test.target --log-target=console \
  --show-status=no </dev/null >>"$dir/systemd.log" 2>&1
