// Package e2e holds everynode's end-to-end scenarios. They run against the
// real control plane that package cluster starts (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler with the everynode extender, kwok
// nodes) with the chart installed by Helm and everynode running under the
// chart's ServiceAccount. Run them with `make e2e`; each scenario checks what
// a user would see, through the real API.
//
// Most scenarios run with the harness's own CA (the chart's external mode
// with tls.caBundle); certs_test.go switches the chart and everynode to the
// self-signed mode and to cert-manager (its controller and cainjector built
// from its library module) and back, so those two are tried against the
// real API server too.
//
// faults_test.go breaks things on purpose: it kills the leading replica of
// two mid-rollout, restarts kube-apiserver, stops everynode with SIGSTOP,
// deletes a set with --cascade=orphan and makes it again, and upgrades
// over revisions in the old data format. It counts pod creates in the
// kube-apiserver audit log that the harness turns on.
//
// metrics_test.go scrapes everynode's /metrics after a rollout and checks
// that every metric the chart's alerts and dashboard query is exported
// (the queries come from package charts, as in cmd/everynode's unit test).
//
// This is its own Go module, so the product's go.mod does not inherit the
// test-only dependencies.
package e2e
