//go:build tools

// Package tools pins the node commands (and the static kube-scheduler of
// the chart's second scheduler's image) that e2e/hack/tools.sh builds into
// .e2e/bin; the blank imports only make `go mod tidy` keep their modules.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
