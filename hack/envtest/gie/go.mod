module github.com/gpustack/gpustack-render/hack/envtest/gie

go 1.25.0

// Not built: only the InferencePool CRD (inference.networking.k8s.io/v1) is copied from this
// module's config/crd/bases. v1.4.0 is the release llm-d-inference-scheduler v0.7.1's endpoint
// picker is built against.
require sigs.k8s.io/gateway-api-inference-extension v1.4.0
