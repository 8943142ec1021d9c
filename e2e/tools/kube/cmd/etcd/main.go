// Command etcd is the upstream etcd server, built from its Go module so the
// e2e cluster needs no downloaded release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
