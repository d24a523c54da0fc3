#!/usr/bin/env bash
# Run one command inside an unpacked root file system, roughly as a container runtime would,
# without one: private mount and PID namespaces (the command is PID 1 there), a fresh /proc, a
# small /dev (null, zero, full, random, urandom, tty bound from the host; /dev/shm a tmpfs),
# then chroot, chdir and drop to UID:GID (no capabilities left). The network namespace is the
# host's, so loopback servers on either side reach each other. SIGTERM, SIGINT and SIGHUP sent
# to this script reach the command; the exit status is the command's. Needs root.
#
#   run-in-rootfs.sh [--read-only] [--user UID:GID] [--cwd DIR] [--env NAME=VALUE]...
#                    [--bind HOST_DIR:DIR[:ro]]... ROOTFS COMMAND [ARG...]
#
#   --read-only  the root is mounted read-only (like readOnlyRootFilesystem: true); only /dev/shm
#                and the --bind directories that are not :ro stay writable
#   --user       numeric uid:gid to run as (default 0:0); supplementary groups are cleared
#   --cwd        working directory inside the root (default /)
#   --env        the command's whole environment is these variables (nothing is inherited)
#   --bind       bind-mount a host directory onto an existing directory of the root
#
# The root itself is never changed by the mounts (they live in the private namespace).
set -euo pipefail

if [[ "${1:-}" == "--inside" ]]; then
    # Second stage, already in the new namespaces: "$2" is the serialised options.
    shift
    read_only="$1" user="$2" cwd="$3" root="$4" binds="$5" envs="$6"
    shift 6
    mount --make-rprivate /
    mount --bind "${root}" "${root}"
    mount -t proc -o nosuid,nodev,noexec proc "${root}/proc"
    mount -t tmpfs -o nosuid,noexec,mode=0755,size=1m tmpfs "${root}/dev"
    for node in null zero full random urandom tty; do
        touch "${root}/dev/${node}"
        mount --bind "/dev/${node}" "${root}/dev/${node}"
    done
    ln -s /proc/self/fd "${root}/dev/fd"
    ln -s /proc/self/fd/0 "${root}/dev/stdin"
    ln -s /proc/self/fd/1 "${root}/dev/stdout"
    ln -s /proc/self/fd/2 "${root}/dev/stderr"
    mkdir "${root}/dev/shm"
    mount -t tmpfs -o nosuid,nodev,noexec,mode=1777,size=64m tmpfs "${root}/dev/shm"
    if [[ -n "${binds}" ]]; then
        IFS=$'\n' read -r -d '' -a bind_list <<<"${binds}" || true
        for spec in "${bind_list[@]}"; do
            IFS=: read -r source target mode <<<"${spec}"
            mount --bind "${source}" "${root}${target}"
            if [[ "${mode:-}" == "ro" ]]; then
                mount -o remount,bind,ro "${root}${target}"
            fi
        done
    fi
    if [[ "${read_only}" == "1" ]]; then
        mount -o remount,bind,ro "${root}"
    fi
    ids=()
    if [[ "${user}" != "0:0" ]]; then
        ids=(--setuid "${user%%:*}" --setgid "${user##*:}")
    fi
    env_list=()
    if [[ -n "${envs}" ]]; then
        IFS=$'\n' read -r -d '' -a env_list <<<"${envs}" || true
    fi
    # The command's environment is exactly --env; unshare chroots, changes directory, drops the
    # ids and looks the command up on the image's PATH.
    exec env -i "${env_list[@]}" "$(command -v unshare)" --root="${root}" --wd="${cwd}" \
        "${ids[@]}" -- "$@"
fi

read_only=0
user="0:0"
cwd="/"
envs=""
binds=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --read-only) read_only=1; shift ;;
        --user) user="$2"; shift 2 ;;
        --cwd) cwd="$2"; shift 2 ;;
        --env) envs+="$2"$'\n'; shift 2 ;;
        --bind) binds+="$2"$'\n'; shift 2 ;;
        --) shift; break ;;
        -*) echo "run-in-rootfs.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [[ $# -lt 2 ]]; then
    echo "usage: run-in-rootfs.sh [options] ROOTFS COMMAND [ARG...]" >&2
    exit 2
fi
if [[ ! "${user}" =~ ^[0-9]+:[0-9]+$ ]]; then
    echo "run-in-rootfs.sh: --user wants numeric UID:GID, not ${user}" >&2
    exit 2
fi
root="$(cd "$1" && pwd -P)"
shift
if [[ "${EUID}" -ne 0 ]]; then
    echo "run-in-rootfs.sh: needs root (mount and chroot)" >&2
    exit 3
fi
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
# unshare --fork blocks SIGTERM and SIGINT in its own process and kills the command if it dies
# (--kill-child); this script passes SIGTERM, SIGINT and SIGHUP on to the command (unshare's
# child) and exits with the command's status.
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin unshare --mount --pid --fork --kill-child -- \
    bash "${self}" --inside "${read_only}" "${user}" "${cwd}" "${root}" "${binds}" "${envs}" \
    "$@" 0<&0 &
runner=$!
forward() { # <signal>
    local -a children=()
    read -r -a children 2>/dev/null <"/proc/${runner}/task/${runner}/children" || true
    if [[ ${#children[@]} -gt 0 ]]; then
        kill -s "$1" "${children[@]}" 2>/dev/null || true
    fi
}
for sig in TERM INT HUP; do
    # shellcheck disable=SC2064  # the signal name is fixed when the trap is set
    trap "forward ${sig}" "${sig}"
done
while true; do
    status=0
    wait "${runner}" || status=$?
    # A trapped signal interrupts wait (status > 128) while the command still runs.
    if ! kill -0 "${runner}" 2>/dev/null; then
        exit "${status}"
    fi
done
