// Package e2e holds everynode's end-to-end scenarios. They run against the
// real control plane that e2e/hack/cluster.sh starts (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler with the everynode extender, kwok
// nodes) with the chart installed by Helm and everynode running under the
// chart's ServiceAccount. Run them with `make e2e`; each scenario checks what
// a user would see, through the real API.
//
// This is its own Go module, so the product's go.mod does not inherit the
// test-only dependencies.
package e2e
