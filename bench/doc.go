// Command bench measures everynode against kube-controller-manager's built-in
// DaemonSet controller on one local kwok cluster: the same fluentd-elasticsearch
// DaemonSet applied as apps/v1 (A, upstream) and as everynode.io/v1alpha1 (B),
// alternating A, B, A, B, ... so that drift of the machine hits both alike.
//
// Each run: rollout until every node has an available pod, a rolling update
// with maxUnavailable 10%, one with maxSurge 10%, then waves of nodes
// joining at once (six of 50 by default). It records durations, API requests per daemon pod (from the API
// server's audit log, by user agent, and apiserver_request_total), controller
// CPU and RSS (/proc), webhook and extender latency (histogram deltas) and
// the scheduler's binding rate, and writes a markdown table and a PNG plot to
// --out as <N>-nodes.md and <N>-nodes.png, one pair per scale that each run
// replaces. It is started by `make bench` (the bench verb of e2e/cmd/cluster),
// which sets up the cluster; see bench/README.md.
//
// Two subcommands read the logs of a cluster kept after a run
// (KEEP_CLUSTER=1): `bench join-trace AUDIT_LOG BENCH_LOG` traces the join
// waves' pods through kube-apiserver, kube-scheduler and kwok
// (jointrace.go); `bench inplace-window AUDIT_LOG START END` shows what
// bounds an in-place update (inplacewindow.go).
package main
