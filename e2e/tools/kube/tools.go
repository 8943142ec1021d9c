//go:build tools

// Package tools pins the control-plane commands that e2e/hack/tools.sh builds
// into .e2e/bin. The build tag keeps this file out of every build; the blank
// imports only make `go mod tidy` keep these modules (and their go.sum lines).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
