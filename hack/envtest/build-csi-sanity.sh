#!/usr/bin/env bash
# Build csi-sanity, the CSI spec's conformance suite (kubernetes-csi/csi-test), from the Go module
# pinned in hack/envtest/csi-test/go.mod (a `tool` directive: `go build` builds the release code
# as it is). Kept apart from build.sh so that the cluster tests do not pay for it.
#
# Output: ${GPUSTACK_ENVTEST_CACHE:-$HOME/.cache/gpustack-render/envtest}/csi-test-<v>/csi-sanity
# The only line written to stdout is the binary's path; an existing binary is not rebuilt.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_cmd="${GO:-}"
if [[ -z "${go_cmd}" ]]; then
    if command -v go >/dev/null 2>&1; then
        go_cmd="go"
    elif [[ -x /usr/local/go/bin/go ]]; then
        go_cmd="/usr/local/go/bin/go"
    else
        echo "build-csi-sanity.sh: no Go toolchain found (set GO or put go on PATH)" >&2
        exit 1
    fi
fi
version="$(awk '$1 == "github.com/kubernetes-csi/csi-test/v5" && $2 ~ /^v/ { print $2; exit }' \
    "${here}/csi-test/go.mod")"
if [[ -z "${version}" ]]; then
    echo "build-csi-sanity.sh: cannot read csi-test's version from ${here}/csi-test/go.mod" >&2
    exit 1
fi
cache_root="${GPUSTACK_ENVTEST_CACHE:-${HOME}/.cache/gpustack-render/envtest}"
out="${cache_root}/csi-test-${version}/csi-sanity"
mkdir -p "$(dirname "${out}")"
exec 9>"${cache_root}/.csi-test.lock"
flock 9
if [[ ! -x "${out}" ]]; then
    echo "build-csi-sanity.sh: building csi-sanity ${version} (a few minutes on a cold cache)..." >&2
    start=${SECONDS}
    tmp="${out}.tmp.$$"
    GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 GOWORK=off \
        "${go_cmd}" -C "${here}/csi-test" build -trimpath -buildvcs=false -ldflags "-s -w" \
        -o "${tmp}" github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity
    mv -f "${tmp}" "${out}"
    echo "$((SECONDS - start))" >"${out}.build-seconds"
    echo "build-csi-sanity.sh: built csi-sanity in $((SECONDS - start))s" >&2
fi
echo "${out}"
