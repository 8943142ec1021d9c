// Package extender is everynode's kube-scheduler extender: the filter,
// prioritize and preempt verbs of k8s.io/kube-scheduler/extender/v1, with
// nodeCacheCapable: true (node names in, node names out), answered from the
// informer caches the controller shares.
//
// Which pods reach it is kube-scheduler's choice. With the daemon-pod
// marker (placement.WithDaemonResource) and the configuration package
// schedconfig renders, only daemon pods do: the extender's managedResources
// names the marker, so a hung everynode costs other pods nothing. Without
// the marker every pod does, and two kinds of pods reach it. A daemon pod (placement.IsDaemonPod) may only
// go to its target node, and only while that node exists, is still eligible
// for the set and holds no other live pod of it (a surge pod of a rolling
// update excepted). Every other pod of the cluster is kept off the nodes
// where a set with spec.nodeReadinessGate should run but has no Ready pod
// yet, except pods of built-in apps DaemonSets: node plumbing such as
// kube-proxy may be what the gated daemon waits for. That second path runs
// for every pod the scheduler places, so it reads a precomputed snapshot
// (gate.go) and costs one map lookup per node, or nothing at all when no
// set is gated.
//
// The extender is configured ignorable: the webhook pins daemon pods to their
// node and the controller counts them, so nothing relies on it for
// correctness; it makes placement faster and explains refusals.
//
// schedconfig no longer configures the prioritize verb (a daemon pod's
// pinning leaves one node to score; every other pod got an empty list), but
// it is still served for configurations written before.
//
// Each verb is a pure function (filter.go, prioritize.go, preempt.go) behind
// one thin HTTP shell (transport.go). Package codec reads and writes the
// verbs' JSON without reflection; package schedconfig renders the
// KubeSchedulerConfiguration that points kube-scheduler at these routes.
package extender
