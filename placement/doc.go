// Package placement holds the DaemonSet semantics that the webhook, the
// scheduler extender and the controller must agree on, as pure functions with
// no I/O: whether a node runs a set (shouldRun, shouldContinueRunning), the
// default daemon tolerations, the node-pinning affinity, the target node of a
// pod, and whether a pod is updated, ready or available.
//
// The rules follow the built-in DaemonSet controller
// (k8s.io/kubernetes/pkg/controller/daemon) and use k8s.io/component-helpers
// for affinity and taint matching, so everynode decides exactly as upstream.
package placement
