module github.com/gpustack/gpustack-render/hack/envtest/yaml2json

go 1.25.0

// The versions kubectl v1.35.4 (hack/envtest/kubernetes/go.mod) is built with.
require (
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	sigs.k8s.io/yaml v1.6.0
)
