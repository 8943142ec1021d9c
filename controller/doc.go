// Package controller is everynode's DaemonSet controller: it keeps one pod
// of every everynode.io/v1alpha1 DaemonSet on each node that should run it,
// rolls out template changes, keeps ControllerRevisions for rollback and
// reports status, following k8s.io/kubernetes/pkg/controller/daemon.
//
// The shape is kubernetes/sample-controller's: informers in, a rate-limited
// work queue of set keys, workers that sync one set at a time. A sync
// (sync.go) reads the set from the cache, finds or makes its current
// ControllerRevision (history.go), checks that the pod changes it asked for
// have shown in the cache (expectations.go), and reads one snapshot of the
// set's nodes and pods (plan.View). Everything that decides lives in
// package plan, which imports no client, lister or queue: the view, the
// sync's two decisions made once on it (View.Decide: the rollout's verdict
// against its failure policy, and the rollout policy under it), what each
// node needs (plan.PlanNode), the rolling update's step
// (plan.PlanRollingUpdate, plan.SplitInPlace, plan.PlanGateOpenings) and
// the status with its conditions (plan.ComputeStatus). This package feeds
// plan from the informers and carries out its answers: syncNodes
// (syncnodes.go) sends the creates and deletes through a PodControl
// (podcontrol.go), and the status goes out through the status subresource.
//
// The rules every part of everynode shares come from package placement:
// which nodes should run a set, the update strategy, the daemon pod's stamp
// (placement.NewPod) and the revision format (placement/revision). When
// requests go out is package pacing's: the request budget, slow start,
// pod-event batching and the spacing of status writes. The controller's
// memory of each set between syncs (pending pod changes, the last status
// write, pacing) is one setState, forgotten in one step (state.go).
//
// Where it differs from upstream, on purpose:
//   - Pods are created pinned to their node by required node affinity and
//     carry the target node in an annotation; the pod webhook stamps them
//     again after the set's node overrides. A pod counts as a set's only
//     with the daemon-pod label and a controller reference to the set's UID;
//     orphans that match the selector are adopted as upstream's ClaimPods
//     (claim.go), and an adoption is expected like a creation on its node.
//   - Node events touch only the sets that can care about the node (an
//     index of sets by nodeName and nodeSelector, and the pods already on
//     the node), never every set in the cluster (nodes.go, indexes.go).
//   - Expectations track creations per node and deletions per pod, so a
//     late or unrelated pod event never satisfies one it does not belong to.
//     That is also why a sync that waits for earlier changes may still
//     create the pod of a node that shows none and has no creation pending
//     (createOnBareNodes in sync.go). Upstream's does nothing, so there a node
//     that joins during a rolling update waits for the rollout's requests.
//   - A sync reads each pod's facts (revision hash, Ready, in-place state,
//     target node, selector match) into the snapshot where upstream
//     re-reads them in every step, and derives them once per pod object,
//     not once per sync (plan.PodMemo); the rolling update after manage
//     works on pods read afresh.
//   - A sync right after a status write works on the object that write
//     returned, not on the older cached copy (statuswrites.go).
//   - Rolling updates add partition, a canary node selector and pause
//     (plan.Policy), and conditions say why a rollout waits
//     (plan/conditions.go).
//   - With podUpdatePolicy InPlaceIfPossible, an old pod whose revision
//     differs in images only is patched rather than deleted (inplace.go):
//     the same choice of pods within maxUnavailable, a pod that counts as
//     unavailable until its new containers are ready, and an optional
//     readiness gate the controller closes before the patch and opens
//     after. Expectations track those patches per pod, as deletions.
//   - Pacing: see package pacing.
//
// The informer handlers (handlers.go, nodes.go) only resolve an object to
// the sets it concerns and enqueue them.
//
// A Controller runs once, for one leadership term: Run catches up with the
// API server first (a consistent list of daemon pods; those the cache does
// not show yet are expected, catchup.go), and when it returns its workers
// have stopped and its handlers are off the shared informers. A replica
// that wins the Lease again makes a new Controller (cmd/everynode
// leader.go).
package controller
