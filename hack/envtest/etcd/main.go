// Command etcd is a thin wrapper that builds the upstream etcd server from the
// go.etcd.io/etcd/server/v3 module for the integration tests' control plane.
// See hack/envtest/build.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
