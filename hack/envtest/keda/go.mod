module github.com/gpustack/gpustack-render/hack/envtest/keda

go 1.26.0

// Not built: KEDA's CRDs (config/crd/bases) are copied from this module by build.sh, so a
// test can check the ScaledObject examples against KEDA's own schema.
require github.com/kedacore/keda/v2 v2.20.2
