#!/usr/bin/env bash
# Build the simulated cluster's components from the Go modules pinned in hack/envtest/*/go.mod:
#
#   kubernetes/  k8s.io/kubernetes     kube-apiserver, kube-scheduler, kube-controller-manager, kubectl
#   etcd/        go.etcd.io/etcd       etcd
#   kueue/       sigs.k8s.io/kueue     kueue (the manager; its CRDs and webhook manifests are copied too)
#   kwok/        sigs.k8s.io/kwok      kwok (fake Nodes and the Pod lifecycle)
#   metrics-server/  sigs.k8s.io/metrics-server  metrics-server (the resource metrics API the
#                                      HPA reads, scraping KWOK's emulated kubelet metrics)
#   helm/        helm.sh/helm/v3       helm (the chart's lint, template and dry-run tests)
#   gie/         sigs.k8s.io/gateway-api-inference-extension  not built: its CRDs are copied
#                                      (InferencePool inference.networking.k8s.io/v1)
#   keda/        github.com/kedacore/keda/v2  not built: its CRDs are copied (schema checks)
#   yaml2json/   sigs.k8s.io/yaml      yaml2json (kubectl's YAML-to-JSON converter, for the YAML
#                                      reader's differential test; a small main of our own)
#
# The kubernetes, kueue, kwok, metrics-server and helm modules name their upstream commands with
# go.mod `tool` directives, so `go build <upstream package>` builds the release code as it is;
# etcd has a one-line wrapper (its main package is not importable by path).
#
# Output layout (outside the repository, reused across runs on the same machine):
#   ${GPUSTACK_ENVTEST_CACHE:-$HOME/.cache/gpustack-render/envtest}/
#       kubernetes-<v>/{kube-apiserver,kube-scheduler,kube-controller-manager,kubectl}
#       etcd-<v>/etcd
#       kueue-<v>/kueue  kueue-<v>/crds/{bases,patches,kustomization.yaml}  kueue-<v>/webhook/manifests.yaml
#       kwok-<v>/kwok  kwok-<v>/stages/*.yaml  kwok-<v>/metrics/*.yaml  kwok-<v>/crds/*.yaml
#       metrics-server-<v>/metrics-server
#       keda-<v>/crds/*.yaml
#       helm-<v>/helm
#       gie-<v>/crds/*.yaml
#       yaml2json-<sigs.k8s.io/yaml v>-<go.yaml.in/yaml/v2 v>/yaml2json
#       bin-<k8s>-<etcd>-<kueue>-<kwok>/   symbolic links to all of the above (printed on stdout)
#
# A binary that already exists is not rebuilt; delete its directory to force a rebuild. The only
# line written to stdout is the bin directory; progress (and each build's duration) goes to
# stderr. `build.sh --only kube-apiserver,etcd` builds a subset (the bin directory still links
# whatever exists).
#
# Environment:
#   GPUSTACK_ENVTEST_CACHE  cache root (default $HOME/.cache/gpustack-render/envtest)
#   GO                      go command to use (default: `go` on PATH, else /usr/local/go/bin/go)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

only=""
if [[ "${1:-}" == "--only" ]]; then
    only=",${2:-},"
fi
wanted() { [[ -z "${only}" || "${only}" == *",$1,"* ]]; }

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
k8s_version="$(module_version "${here}/kubernetes/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "${here}/etcd/go.mod" go.etcd.io/etcd/server/v3)"
kueue_version="$(module_version "${here}/kueue/go.mod" sigs.k8s.io/kueue)"
kwok_version="$(module_version "${here}/kwok/go.mod" sigs.k8s.io/kwok)"
helm_version="$(module_version "${here}/helm/go.mod" helm.sh/helm/v3)"
gie_version="$(module_version "${here}/gie/go.mod" sigs.k8s.io/gateway-api-inference-extension)"
metrics_server_version="$(module_version "${here}/metrics-server/go.mod" sigs.k8s.io/metrics-server)"
keda_version="$(module_version "${here}/keda/go.mod" github.com/kedacore/keda/v2)"
sigsyaml_version="$(module_version "${here}/yaml2json/go.mod" sigs.k8s.io/yaml)"
goyaml_version="$(module_version "${here}/yaml2json/go.mod" go.yaml.in/yaml/v2)"
for v in k8s_version etcd_version kueue_version kwok_version gie_version metrics_server_version keda_version; do
    if [[ -z "${!v}" ]]; then
        echo "build.sh: cannot read ${v%_version}'s pinned version from hack/envtest/*/go.mod" >&2
        exit 1
    fi
done

cache_root="${GPUSTACK_ENVTEST_CACHE:-${HOME}/.cache/gpustack-render/envtest}"
mkdir -p "${cache_root}"

# Serialise concurrent invocations (e.g. several pytest processes) on the same cache.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${cache_root}/.lock"
    flock 9
fi

build() { # <module dir> <package> <output path> [extra ldflags]
    local dir="$1" pkg="$2" out="$3" extra="${4:-}"
    if [[ -x "${out}" ]]; then
        echo "build.sh: ${out} already built" >&2
        return 0
    fi
    echo "build.sh: building $(basename "${out}") (several minutes on a cold cache)..." >&2
    mkdir -p "$(dirname "${out}")"
    local start=${SECONDS}
    local tmp="${out}.tmp.$$"
    # -mod=readonly: the committed go.mod/go.sum are authoritative.
    GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 GOWORK=off \
        "${go_cmd}" -C "${dir}" build -trimpath -buildvcs=false -ldflags "-s -w ${extra}" \
        -o "${tmp}" "${pkg}"
    mv -f "${tmp}" "${out}"
    # Kept beside the binary: the benchmarks report what the first build here cost.
    echo "$((SECONDS - start))" >"${out}.build-seconds"
    echo "build.sh: built $(basename "${out}") in $((SECONDS - start))s" >&2
}

k8s_dir="${cache_root}/kubernetes-${k8s_version}"
etcd_dir="${cache_root}/etcd-${etcd_version}"
kueue_dir="${cache_root}/kueue-${kueue_version}"
kwok_dir="${cache_root}/kwok-${kwok_version}"

k8s_minor="${k8s_version#v1.}"
k8s_minor="${k8s_minor%%.*}"
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=${k8s_version} \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${k8s_minor} \
-X k8s.io/component-base/version.gitTreeState=clean"

if wanted etcd; then
    build "${here}/etcd" . "${etcd_dir}/etcd"
fi
for cmd in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    if wanted "${cmd}"; then
        build "${here}/kubernetes" "k8s.io/kubernetes/cmd/${cmd}" "${k8s_dir}/${cmd}" "${k8s_ldflags}"
    fi
done
if wanted kueue; then
    build "${here}/kueue" sigs.k8s.io/kueue/cmd/kueue "${kueue_dir}/kueue" \
        "-X sigs.k8s.io/kueue/pkg/version.GitVersion=${kueue_version}"
fi
if wanted kwok; then
    build "${here}/kwok" sigs.k8s.io/kwok/cmd/kwok "${kwok_dir}/kwok"
fi
if wanted metrics-server; then
    # Its release build stamps client-go's version package (the Makefile's VERSION_LDFLAGS).
    build "${here}/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server \
        "${cache_root}/metrics-server-${metrics_server_version}/metrics-server" \
        "-X k8s.io/client-go/pkg/version.gitVersion=${metrics_server_version}"
fi
if wanted helm; then
    build "${here}/helm" helm.sh/helm/v3/cmd/helm "${cache_root}/helm-${helm_version}/helm" \
        "-X helm.sh/helm/v3/internal/version.version=${helm_version}"
fi

yaml2json_dir="${cache_root}/yaml2json-${sigsyaml_version}-${goyaml_version}"
if wanted yaml2json; then
    build "${here}/yaml2json" . "${yaml2json_dir}/yaml2json"
fi

# Sets mod_dir to the source directory of a module pinned by hack/envtest/<dir>/go.mod (called
# directly, not in $(...), so `set -e` stops the script when a go command fails).
module_dir() { # <dir under hack/envtest> <module path>
    mod_dir="$(GOFLAGS=-mod=readonly GOWORK=off "${go_cmd}" -C "${here}/$1" list -m \
        -f '{{.Dir}}' "$2")"
    if [[ -z "${mod_dir}" || ! -d "${mod_dir}" ]]; then
        # `go list -m` leaves Dir empty until the module is in the module cache.
        GOFLAGS=-mod=readonly GOWORK=off "${go_cmd}" -C "${here}/$1" mod download "$2"
        mod_dir="$(GOFLAGS=-mod=readonly GOWORK=off "${go_cmd}" -C "${here}/$1" list -m \
            -f '{{.Dir}}' "$2")"
    fi
}

# Kueue's CRDs and webhook manifests, taken from the same module the binary is built from.
if [[ ! -f "${kueue_dir}/.manifests-complete" ]]; then
    echo "build.sh: copying Kueue ${kueue_version} CRDs and webhook manifests..." >&2
    module_dir kueue sigs.k8s.io/kueue
    if [[ ! -d "${mod_dir}/config/components/crd/bases" ]]; then
        echo "build.sh: no Kueue CRDs under ${mod_dir}" >&2
        exit 1
    fi
    mkdir -p "${kueue_dir}/crds" "${kueue_dir}/webhook"
    # bases/ are the CRDs; kustomization.yaml + patches/ say which get a conversion webhook.
    cp -r "${mod_dir}"/config/components/crd/bases "${mod_dir}"/config/components/crd/patches \
        "${mod_dir}"/config/components/crd/kustomization.yaml "${kueue_dir}/crds/"
    cp "${mod_dir}"/config/components/webhook/manifests.yaml "${kueue_dir}/webhook/"
    chmod -R u+w "${kueue_dir}/crds" "${kueue_dir}/webhook"
    touch "${kueue_dir}/.manifests-complete"
fi

# KWOK's own "fast" Stages (what kwokctl installs by default): Nodes initialise and keep a
# heartbeat through their Lease; bound Pods turn Running and Ready; deleted Pods go once their
# finalizers are gone (KWOK removes none itself, so Kueue's finalizer is honoured).
if [[ ! -f "${kwok_dir}/.stages-complete" ]]; then
    echo "build.sh: copying KWOK ${kwok_version} stages..." >&2
    module_dir kwok sigs.k8s.io/kwok
    stages="${mod_dir}/kustomize/stage"
    mkdir -p "${kwok_dir}/stages"
    cp "${stages}/node/fast/node-initialize.yaml" \
        "${stages}/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
        "${stages}/pod/fast/pod-ready.yaml" "${stages}/pod/fast/pod-complete.yaml" \
        "${stages}/pod/fast/pod-delete.yaml" "${kwok_dir}/stages/"
    chmod -R u+w "${kwok_dir}/stages"
    touch "${kwok_dir}/.stages-complete"
fi

# Gateway API Inference Extension's CRDs (not run here: a rendered InferencePool is checked
# against the API server with the CRD as published; bases/ also holds the x-k8s.io alpha CRDs).
gie_dir="${cache_root}/gie-${gie_version}"
if [[ ! -f "${gie_dir}/.crds-complete" ]]; then
    echo "build.sh: copying Gateway API Inference Extension ${gie_version} CRDs..." >&2
    module_dir gie sigs.k8s.io/gateway-api-inference-extension
    if [[ ! -f "${mod_dir}/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml" ]]; then
        echo "build.sh: no InferencePool CRD under ${mod_dir}" >&2
        exit 1
    fi
    mkdir -p "${gie_dir}/crds"
    cp "${mod_dir}"/config/crd/bases/*.yaml "${gie_dir}/crds/"
    chmod -R u+w "${gie_dir}/crds"
    touch "${gie_dir}/.crds-complete"
fi

# KWOK's emulated kubelet resource metrics (for metrics-server, behind the harness's autoscaling
# option): the `Metric` serving /metrics/nodes/{nodeName}/metrics/resource with the kubelet's
# series, and the ResourceUsage/ClusterResourceUsage CRDs that set a Pod's emulated usage.
if [[ ! -f "${kwok_dir}/.metrics-complete" ]]; then
    echo "build.sh: copying KWOK ${kwok_version} resource metrics and usage CRDs..." >&2
    module_dir kwok sigs.k8s.io/kwok
    mkdir -p "${kwok_dir}/metrics" "${kwok_dir}/crds"
    cp "${mod_dir}/kustomize/metrics/resource/metrics-resource.yaml" \
        "${mod_dir}/kustomize/metrics/usage/usage-from-annotation.yaml" "${kwok_dir}/metrics/"
    cp "${mod_dir}/kustomize/crd/bases/kwok.x-k8s.io_resourceusages.yaml" \
        "${mod_dir}/kustomize/crd/bases/kwok.x-k8s.io_clusterresourceusages.yaml" "${kwok_dir}/crds/"
    chmod -R u+w "${kwok_dir}/metrics" "${kwok_dir}/crds"
    touch "${kwok_dir}/.metrics-complete"
fi

# KEDA's CRDs (not run here: the ScaledObject examples are checked against KEDA's own schema).
keda_dir="${cache_root}/keda-${keda_version}"
if [[ ! -f "${keda_dir}/.crds-complete" ]]; then
    echo "build.sh: copying KEDA ${keda_version} CRDs..." >&2
    module_dir keda github.com/kedacore/keda/v2
    mkdir -p "${keda_dir}/crds"
    cp "${mod_dir}"/config/crd/bases/*.yaml "${keda_dir}/crds/"
    chmod -R u+w "${keda_dir}/crds"
    touch "${keda_dir}/.crds-complete"
fi

# One directory that links every component, named by all four versions.
bin_dir="${cache_root}/bin-${k8s_version}-${etcd_version}-kueue-${kueue_version}-kwok-${kwok_version}"
mkdir -p "${bin_dir}"
link() { # <target>
    if [[ -e "$1" ]]; then
        ln -sfn "$1" "${bin_dir}/$(basename "$1")"
    fi
}
link "${etcd_dir}/etcd"
for cmd in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    link "${k8s_dir}/${cmd}"
done
link "${kueue_dir}/kueue"
link "${kwok_dir}/kwok"
link "${cache_root}/helm-${helm_version}/helm"
link "${cache_root}/metrics-server-${metrics_server_version}/metrics-server"
link "${yaml2json_dir}/yaml2json"
ln -sfn "${kueue_dir}/crds" "${bin_dir}/kueue-crds"
ln -sfn "${kueue_dir}/webhook" "${bin_dir}/kueue-webhook"
ln -sfn "${kwok_dir}/stages" "${bin_dir}/kwok-stages"
ln -sfn "${gie_dir}/crds" "${bin_dir}/gie-crds"
ln -sfn "${kwok_dir}/metrics" "${bin_dir}/kwok-metrics"
ln -sfn "${kwok_dir}/crds" "${bin_dir}/kwok-crds"
ln -sfn "${keda_dir}/crds" "${bin_dir}/keda-crds"

echo "${bin_dir}"
