//go:build tools

// Package tools pins the node commands that e2e/hack/tools.sh builds into
// .e2e/bin; the blank imports only make `go mod tidy` keep their modules.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
