// Package cluster is the harness's local cluster as a Go package: a real
// control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and kwok's nodes through kwokctl's binary runtime, the
// chart installed by Helm in external mode, and everynode on this host
// with the chart's ServiceAccount token, so the RBAC under test is what
// the chart grants.
//
// The e2e scenarios, the bench program and the verbs of e2e/cmd/cluster
// (`make cluster`, `make e2e`, `make demo`, `make conformance`, `make
// bench`) all start, stop and restart its parts here: each component runs
// detached and is known by a pid file, and what a cluster was started
// with, and the modes it was switched to (cert mode, client
// authentication, takeover), are kept as Settings in its folder, so a
// restart by any of them starts it the same way.
//
// What other people and scripts rely on, kept stable: the default
// cluster's admin kubeconfig .e2e/kubeconfig, the tools in .e2e/bin
// (kubectl, helm, kwokctl and the control plane), `make cluster` and
// `make cluster-down`. Building the tools stays in e2e/hack/tools.sh.
package cluster
