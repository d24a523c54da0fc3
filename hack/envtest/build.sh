#!/usr/bin/env bash
# Build the envtest control plane (kube-apiserver + etcd) from the Go modules pinned in
# hack/envtest/{kube-apiserver,etcd}/go.mod, and fetch the pinned Kueue CRDs.
#
# Output layout (outside the repository, reused across runs on the same machine):
#   ${GPUSTACK_ENVTEST_CACHE:-$HOME/.cache/gpustack-render/envtest}/<k8s>-<etcd>/
#       kube-apiserver
#       etcd
#       kueue-crds/<kueue version>/kueue.x-k8s.io_*.yaml
#
# A binary that already exists is not rebuilt; delete the directory to force a rebuild.
# The only line written to stdout is the bin directory; progress goes to stderr.
#
# Environment:
#   GPUSTACK_ENVTEST_CACHE  cache root (default $HOME/.cache/gpustack-render/envtest)
#   GO                      go command to use (default: `go` on PATH, else /usr/local/go/bin/go)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Pinned Kueue release whose CRDs the integration tests install (not committed).
KUEUE_VERSION="v0.17.0"

go_cmd="${GO:-}"
if [[ -z "${go_cmd}" ]]; then
    if command -v go >/dev/null 2>&1; then
        go_cmd="go"
    elif [[ -x /usr/local/go/bin/go ]]; then
        go_cmd="/usr/local/go/bin/go"
    else
        echo "build.sh: no Go toolchain found (set GO or put go on PATH)" >&2
        exit 1
    fi
fi

# Module versions straight from the committed go.mod files.
module_version() { # <go.mod> <module path>
    awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }
                   $1 == "require" && $2 == m { print $3; exit }' "$1"
}
k8s_version="$(module_version "${here}/kube-apiserver/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "${here}/etcd/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "${k8s_version}" || -z "${etcd_version}" ]]; then
    echo "build.sh: cannot read pinned versions from hack/envtest/*/go.mod" >&2
    exit 1
fi

cache_root="${GPUSTACK_ENVTEST_CACHE:-${HOME}/.cache/gpustack-render/envtest}"
bin_dir="${cache_root}/${k8s_version}-${etcd_version}"
mkdir -p "${bin_dir}"

# Serialise concurrent invocations (e.g. several pytest processes) on the same cache dir.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${bin_dir}/.lock"
    flock 9
fi

build() { # <module dir> <output name> [extra ldflags]
    local dir="$1" out="$2" extra="${3:-}"
    if [[ -x "${bin_dir}/${out}" ]]; then
        echo "build.sh: ${bin_dir}/${out} already built" >&2
        return 0
    fi
    echo "build.sh: building ${out} (this takes several minutes on a cold cache)..." >&2
    local start=${SECONDS}
    local tmp="${bin_dir}/.${out}.tmp.$$"
    # -mod=readonly: the committed go.mod/go.sum are authoritative.
    GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 \
        "${go_cmd}" -C "${dir}" build -trimpath -buildvcs=false -ldflags "-s -w ${extra}" \
        -o "${tmp}" .
    mv -f "${tmp}" "${bin_dir}/${out}"
    echo "build.sh: built ${out} in $((SECONDS - start))s" >&2
}

k8s_minor="${k8s_version#v1.}"
k8s_minor="${k8s_minor%%.*}"
version_pkg="k8s.io/component-base/version"
build "${here}/etcd" etcd
build "${here}/kube-apiserver" kube-apiserver \
    "-X ${version_pkg}.gitVersion=${k8s_version} -X ${version_pkg}.gitMajor=1 \
-X ${version_pkg}.gitMinor=${k8s_minor} -X ${version_pkg}.gitTreeState=clean"

# Kueue CRDs, taken from the Kueue Go module at the pinned version.
kueue_dir="${bin_dir}/kueue-crds/${KUEUE_VERSION}"
if [[ ! -f "${kueue_dir}/.complete" ]]; then
    echo "build.sh: fetching Kueue ${KUEUE_VERSION} CRDs..." >&2
    # Run outside any module so no go.mod/go.sum in the repository is touched.
    scratch="$(mktemp -d)"
    mod_dir="$(cd "${scratch}" && GOFLAGS= GOWORK=off "${go_cmd}" mod download -json \
        "sigs.k8s.io/kueue@${KUEUE_VERSION}" | awk -F'"' '$2 == "Dir" { print $4 }')"
    rmdir "${scratch}"
    if [[ -z "${mod_dir}" || ! -d "${mod_dir}/config/components/crd/bases" ]]; then
        echo "build.sh: could not download sigs.k8s.io/kueue@${KUEUE_VERSION}" >&2
        exit 1
    fi
    mkdir -p "${kueue_dir}"
    cp "${mod_dir}"/config/components/crd/bases/*.yaml "${kueue_dir}/"
    chmod u+w "${kueue_dir}"/*.yaml
    touch "${kueue_dir}/.complete"
fi

echo "${bin_dir}"
