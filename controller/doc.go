// Package controller is everynode's slim DaemonSet controller: it keeps one
// pod of every everynode.io/v1alpha1 DaemonSet on each node that should run
// it, rolls out template changes, keeps ControllerRevisions for rollback and
// reports status, following k8s.io/kubernetes/pkg/controller/daemon.
//
// What differs from upstream, by design (shared/DESIGN.md):
//   - Pods are created without nodeName or node affinity, carrying only the
//     target node in an annotation; the pod webhook pins them. A pod counts
//     as a set's pod only when it has the daemon-pod label and a controller
//     reference to the set: no orphan adoption.
//   - Node events touch only the sets that can care about the node (an index
//     of sets by nodeName and nodeSelector, and the pods already on the
//     node), never every set in the cluster.
//   - Expectations track creations per node and deletions per pod, so a late
//     or unrelated informer event can never be mistaken for one we wait on.
//   - Rolling updates add partition, a canary node selector and pause.
//   - Status writes that change only counts go out at most once a second
//     per set (statuswrites.go); a new generation, revision or condition
//     status at once. A sync right after a write works on the object that
//     write returned, not on the older cached copy, so it neither repeats
//     the write nor conflicts.
//   - A sync reads the pods only after checking the expectations, and the
//     rolling update after manage works on pods read afresh, never on the
//     view from before manage's requests.
//   - A sync reads each pod once: the snapshot (view.go) groups the pods by
//     node in one slice and keeps each pod's revision hash and Ready
//     condition next to it, where upstream re-reads labels and conditions
//     in every step; pods are looked up by their set's UID.
//   - Pod events are batched per set (podevents.go): a pod event syncs its
//     set after a delay proportional to the set's last snapshot time, unless
//     it completes what the last sync waits for; upstream syncs on every one.
//   - Slow start carries over from sync to sync: the next sync starts at
//     twice the largest batch of the set's last fully successful creates,
//     up to BurstReplicas (slowstart.go), where upstream starts every sync
//     at one pod; the first failure sends the set back to one, and so does
//     the set's coming to rest (or a minute without successful creates).
//   - With a Config.Budget (package budget), the client's QPS goes to pod
//     work first: Normal events and status writes that only move counts
//     take only spare tokens (events.go, statuswrites.go), up to
//     MaxEventDelay and MaxStatusStaleness late, so at the same QPS and the
//     same requests they never push a phase's last pod request back.
//
// The files split by concern: controller.go (construction, Run, workers),
// handlers.go, nodes.go and indexes.go (informer events and lookups),
// sync.go (one set's sync), view.go (the per-sync snapshot), manage.go,
// syncnodes.go and slowstart.go (per-node create/delete, slow start),
// podevents.go (batching of pod events), rollingupdate.go, history.go
// (ControllerRevisions; the pure part is in package revision), status.go,
// statuswrites.go and conditions.go, podcontrol.go, expectations.go,
// metrics.go, events.go (reasons and the budgeted event sink). The
// decisions (planNode, planRollingUpdate, computeStatus) are pure functions
// over the snapshot; the informer and API code around them is thin.
package controller
