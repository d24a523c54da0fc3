#!/usr/bin/env bash
# `make image-rootfs`: build the image the Dockerfile describes without a container engine or a
# registry, from Debian packages and the project's wheels, as an OCI image layout.
#
#   1. mmdebstrap: a minimal Debian 12 (bookworm, the Dockerfile's base too) root file system
#      (variant essential, plus python3, ca-certificates and libstdc++6, which grpcio's compiled
#      core needs for the node plugin; no documentation, manual pages or locales).
#   2. The project's wheel (built from the files the Dockerfile copies) and the wheels of its
#      runtime dependencies for that root's Python and C library, fetched on this machine.
#   3. Inside the root (hack/image/run-in-rootfs.sh): a virtual environment at
#      /opt/gpustack-render (no pip in it), the wheels installed offline, everything compiled to
#      bytecode ahead of time, the imports checked. The user nonroot (65532:65532) is added.
#   4. umoci: an OCI layout with two layers (the Debian root, then /opt/gpustack-render) and the
#      configuration of the Dockerfile's runtime stage (user, command, environment, labels,
#      ports, working directory; tests/integration/test_image.py keeps the two in step).
#
# The layout is cached outside the repository under a hash of every input (this directory, the
# project files the image holds, the apt sources, the suite): a second run with the same inputs
# prints the same layout at once. Next to the layout, <entry>/bundle is the image unpacked by
# `umoci unpack` (a runtime bundle: config.json and rootfs/) for hack/image/run-in-rootfs.sh.
# Runs are serialised by flock. Stdout is one line, `<layout dir>:<tag>` (umoci's image syntax);
# progress and measurements go to stderr, and the measurements are kept in
# <entry>/measurements.
#
# mmdebstrap and umoci are installed with apt-get when missing. Needs root (mmdebstrap's root
# mode, chroot, the owners in the layers); as another user the script re-runs itself with
# `sudo -n` when that works. Exit 3: these prerequisites cannot be had here (the reason on
# stderr); any other failure exits non-zero as usual.
#
# Environment:
#   GPUSTACK_IMAGE_CACHE  cache root (default $HOME/.cache/gpustack-render/image)
#   IMAGE_SUITE           Debian suite (default bookworm; its python3 is the 3.11 the tests expect)
#   IMAGE_APT_SOURCES     deb822 or one-line apt sources file for mmdebstrap (default
#                         /etc/apt/sources.list.d/debian.sources when it names the suite,
#                         else mmdebstrap's default mirror)
#   PYTHON                Python that builds and fetches the wheels (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
say() { echo "build-rootfs: $*" >&2; }
unavailable() { say "$*"; exit 3; }

if [[ "${EUID}" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        exec sudo -n --preserve-env=GPUSTACK_IMAGE_CACHE,IMAGE_SUITE,IMAGE_APT_SOURCES,PYTHON \
            HOME="${HOME}" bash "${BASH_SOURCE[0]}" "$@"
    fi
    unavailable "needs root (mmdebstrap root mode, chroot) and sudo -n is not available"
fi

# ---- tools ----------------------------------------------------------------------------------
missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
command -v umoci >/dev/null 2>&1 || missing+=(umoci)
for tool in unshare chroot mount flock sha256sum; do
    command -v "${tool}" >/dev/null 2>&1 || unavailable "${tool} is missing (util-linux, coreutils)"
done
if [[ ${#missing[@]} -gt 0 ]]; then
    command -v apt-get >/dev/null 2>&1 || unavailable "${missing[*]} missing and no apt-get here"
    say "installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
        apt-get update -q >&2 || true
        apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
            unavailable "apt-get could not install ${missing[*]}"
    fi
fi

python="${PYTHON:-python3}"
suite="${IMAGE_SUITE:-bookworm}"
sources="${IMAGE_APT_SOURCES:-}"
# This machine's Debian sources when they are for the suite (mmdebstrap pastes the file as is).
if [[ -z "${sources}" ]] && grep -qsw "${suite}" /etc/apt/sources.list.d/debian.sources; then
    sources=/etc/apt/sources.list.d/debian.sources
fi
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "${root}/pyproject.toml" | head -n 1)"
tag="v${version}"
# libstdc++6: grpcio (the node plugin's gRPC server) links its C++ core against it.
packages="python3,ca-certificates,libstdc++6"

# ---- the cache entry ------------------------------------------------------------------------
# The project files the image holds are the ones the Dockerfile copies (.dockerignore).
project_files() {
    (cd "${root}" && find pyproject.toml README.md gpustack_render gpustack_kube \
        gpustack_controller gpustack_webhook gpustack_modelmanager -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z)
}
key="$({
    echo "suite=${suite} packages=${packages} arch=$(dpkg --print-architecture 2>/dev/null)"
    [[ -n "${sources}" ]] && cat "${sources}"
    (cd "${here}" && sha256sum ./*.sh)
    project_files | (cd "${root}" && xargs -0 sha256sum)
} | sha256sum | cut -c1-16)"
cache="${GPUSTACK_IMAGE_CACHE:-${HOME}/.cache/gpustack-render/image}"
entry="${cache}/${key}"
layout="${entry}/oci"
mkdir -p "${cache}"
exec 9>"${cache}/.lock"
flock 9
if [[ -f "${entry}/done" ]]; then
    touch "${entry}/done"
    say "cached: ${layout}:${tag}"
    echo "${layout}:${tag}"
    exit 0
fi
# Entries nobody used for two weeks go (every use touches done), and so do the work
# directories of builds that were killed (no build runs but this one: the lock).
find "${cache}" -mindepth 2 -maxdepth 2 -name 'done' -mtime +14 -printf '%h\n' |
    xargs -r rm -rf --
find "${cache}" -mindepth 1 -maxdepth 1 -name 'build.*' -exec rm -rf -- {} +
rm -rf "${entry}"
work="$(mktemp -d "${cache}/build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
started=${SECONDS}

# ---- 1. the Debian root ---------------------------------------------------------------------
rootfs="${work}/rootfs"
say "mmdebstrap ${suite} (${packages}) from ${sources:-the default mirror}"
mmdebstrap --quiet --variant=essential --include="${packages}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    "${suite}" "${rootfs}" ${sources:+"${sources}"} >&2
# The non-root user the Dockerfile and the manifests run as (numeric there; named here too).
echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >>"${rootfs}/etc/passwd"
echo 'nonroot:x:65532:' >>"${rootfs}/etc/group"
install -d -o 65532 -g 65532 -m 0750 "${rootfs}/home/nonroot"
# A container runtime provides /dev; leftovers of the build go.
find "${rootfs}/dev" -mindepth 1 -delete
rm -f "${rootfs}"/var/cache/debconf/*-old "${rootfs}"/var/lib/dpkg/*-old
find "${rootfs}/var/log" -type f -delete

# ---- 2. the wheels, for the root's Python and C library -------------------------------------
py_version="$(chroot "${rootfs}" /usr/bin/python3 -c \
    'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
# shellcheck disable=SC2016  # dpkg-query's own ${Version}
glibc="$(chroot "${rootfs}" dpkg-query -W -f='${Version}' libc6 |
    sed 's/^\([0-9]*\.[0-9]*\).*/\1/')"
machine="$(chroot "${rootfs}" uname -m)"
say "wheels for CPython ${py_version}, glibc ${glibc}, ${machine}"
src="${work}/src"
wheels="${work}/wheels"
mkdir -p "${src}" "${wheels}"
project_files | (cd "${root}" && xargs -0 cp --parents -t "${src}")
"${python}" -m pip wheel --quiet --no-deps --wheel-dir "${wheels}" "${src}" >&2
platforms=(--platform "manylinux2014_${machine}")
for ((minor = ${glibc#*.}; minor >= 17; minor--)); do
    platforms+=(--platform "manylinux_${glibc%%.*}_${minor}_${machine}")
done
abi="cp${py_version/./}"
"${python}" -m pip download --quiet --dest "${wheels}" --only-binary=:all: \
    --python-version "${py_version}" --implementation cp --abi "${abi}" "${platforms[@]}" \
    "${wheels}"/gpustack_render-*.whl pip >&2

# ---- 3. the virtual environment, inside the root --------------------------------------------
venv=/opt/gpustack-render
in_root() {
    bash "${here}/run-in-rootfs.sh" --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        --env PYTHONDONTWRITEBYTECODE=1 --env HOME=/root \
        --bind "${wheels}:/mnt:ro" "${rootfs}" "$@" >&2
}
say "installing into ${venv}"
in_root /usr/bin/python3 -m venv --without-pip "${venv}"
pip_wheel="$(cd "${wheels}" && ls pip-*.whl)"
in_root "${venv}/bin/python" "/mnt/${pip_wheel}/pip" install --quiet --no-index \
    --find-links /mnt --no-compile --no-cache-dir --disable-pip-version-check \
    "gpustack-render==${version}"
# Hash-based bytecode that is never checked against its source: the layers' tar headers keep
# whole seconds only (umoci rounds), so timestamp-based bytecode would be stale after unpacking
# and recompiled in memory on every start.
in_root "${venv}/bin/python" -m compileall -q --invalidation-mode unchecked-hash "${venv}"
in_root "${venv}/bin/python" -c \
    "import gpustack_controller.__main__, gpustack_webhook.__main__, gpustack_modelmanager.__main__"
rm -f "${rootfs}${venv}"/bin/activate* "${rootfs}${venv}"/bin/Activate.ps1

# ---- 4. the OCI layout ----------------------------------------------------------------------
rootfs_bytes="$(du -sb "${rootfs}" | cut -f1)"
app_bytes="$(du -sb "${rootfs}${venv}" | cut -f1)"
mkdir -p "${work}/app"
mv "${rootfs}${venv}" "${work}/app/gpustack-render"
image="${work}/oci:${tag}"
say "packing the OCI layout"
umoci init --layout "${work}/oci"
umoci new --image "${image}"
umoci insert --image "${image}" --history.created_by \
    "mmdebstrap --variant=essential --include=${packages} ${suite}" "${rootfs}" /
umoci insert --image "${image}" --history.created_by \
    "pip install gpustack-render==${version} into ${venv}" "${work}/app/gpustack-render" "${venv}"
# The Dockerfile's runtime stage, field by field.
description="GPUStack ModelDeployment controller and admission webhook server"
umoci config --image "${image}" \
    --config.user 65532:65532 \
    --config.workingdir / \
    --config.env "PATH=${venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --config.env PYTHONDONTWRITEBYTECODE=1 \
    --config.env PYTHONUNBUFFERED=1 \
    --config.cmd python --config.cmd -m --config.cmd gpustack_controller \
    --config.exposedports 8081/tcp --config.exposedports 9443/tcp \
    --config.exposedports 8080/tcp \
    --config.label org.opencontainers.image.title=gpustack-render \
    --config.label "org.opencontainers.image.description=${description}" \
    --config.label org.opencontainers.image.licenses=Apache-2.0 \
    --config.label "org.opencontainers.image.version=${version}" \
    --history.created_by "config from the Dockerfile's runtime stage"
umoci gc --layout "${work}/oci"

mkdir -p "${entry}"
mv "${work}/oci" "${layout}"
image_bytes="$(du -sb "${layout}/blobs" | cut -f1)"
seconds=$((SECONDS - started))
# The image unpacked as a runtime bundle (config.json + rootfs) next to it: the check that it
# unpacks, and what tests/integration/test_image_rootfs.py runs (read-only) without unpacking it
# again on every run.
umoci unpack --image "${layout}:${tag}" "${entry}/bundle" >/dev/null
{
    echo "rootfs_bytes=${rootfs_bytes}"
    echo "venv_bytes=${app_bytes}"
    echo "image_bytes=${image_bytes}"
    echo "build_seconds=${seconds}"
    echo "suite=${suite}"
    echo "python=${py_version}"
} >"${entry}/measurements"
touch "${entry}/done"
say "built ${layout}:${tag} in ${seconds}s: root file system $((rootfs_bytes / 1048576)) MiB" \
    "(${venv} $((app_bytes / 1048576)) MiB), image $((image_bytes / 1048576)) MiB compressed"
echo "${layout}:${tag}"
