// Package plan is everything the DaemonSet controller decides, as pure
// functions over one snapshot of a set's nodes and pods: it imports no
// client, lister or work queue (`make lint` checks), so what it answers
// depends on its arguments alone, and its tests need no fake API server.
//
// A sync reads a View (NewView: the nodes of a NodeSnapshot, the set's
// pods with their facts kept in a PodMemo), then makes its two decisions
// once (View.Decide): the rollout's Verdict against its failure policy,
// and the rollout Policy under that verdict. Every later step reads those:
//   - PlanNode: which pods to create and delete so a node runs exactly one
//     pod of the set (upstream's podsShouldBeOnNode);
//   - PlanRollingUpdate, SplitInPlace, PlanGateOpenings: which old pods the
//     rolling update replaces, which of them it patches in place, and whose
//     in-place readiness gates it opens;
//   - ComputeStatus: the status, its conditions, and when to look again.
//
// The controller package carries the answers out: its requests, queues,
// expectations and pacing are its own.
package plan
