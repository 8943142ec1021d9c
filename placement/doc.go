// Package placement is the one home of the DaemonSet rules that the webhook,
// the scheduler extender, the controller and the kubectl plugin share, as
// pure functions with no I/O:
//
//   - eligibility: whether a node runs a set (Eligibility, ShouldRun and
//     ShouldContinueRunning, with the reason when not);
//   - the default daemon tolerations (DaemonTolerations,
//     WithDaemonTolerations) and the pin to a node (PinToNode);
//   - the daemon pod's stamp (Stamp) and the pod the controller makes
//     (NewPod), with its owner reference (NewControllerRef);
//   - which set controls a pod or revision (ControllerRef), the target node
//     of a pod (TargetNode), and whether a pod is updated, ready or
//     available;
//   - the update strategy with apps/v1's defaults (UpdateStrategy) and the
//     revision history limit;
//   - the revision hash and the data a ControllerRevision stores (package
//     placement/revision).
//
// The condition reasons are API and live with the types, in
// api/everynode/v1alpha1.
//
// The rules follow the built-in DaemonSet controller
// (k8s.io/kubernetes/pkg/controller/daemon) and use k8s.io/component-helpers
// for affinity and taint matching, so everynode decides exactly as upstream.
package placement
