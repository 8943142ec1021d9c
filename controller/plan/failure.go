package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// A rollout that stops itself (rollingUpdate.onFailure, issue 34): the
// rules are pure functions of the set's view, its last status and its
// revisions, so the controller's planner, its status and the tests all
// read one verdict.

// failingPod is a pod of the update revision that fails by the set's
// rules: too many restarts soon after its creation, or not available by
// the progress deadline.
type failingPod struct {
	node, pod string
	// state is what its containers show: "CrashLoopBackOff, 4 restarts",
	// "ImagePullBackOff", "Pending", "not ready".
	state string
}

func (f failingPod) String() string { return fmt.Sprintf("%s on node %s (%s)", f.pod, f.node, f.state) }

// failureRules are the thresholds a pod of the update revision is judged
// by: the set's onFailure, or its defaults when it has none (they then
// only name pods in the progress deadline's message).
func failureRules(s *placement.Strategy) placement.FailurePolicy {
	if s.OnFailure != nil {
		return *s.OnFailure
	}
	return placement.FailurePolicy{
		Action:        everynodev1alpha1.RolloutFailurePause,
		FailedPods:    int(placement.DefaultFailedPods),
		MaxRestarts:   placement.DefaultMaxRestarts,
		RestartWindow: time.Duration(placement.DefaultRestartWindowSeconds) * time.Second,
	}
}

// containerState says in a few words why pod is not serving: the waiting
// reason that points at a broken container, else the phase or readiness;
// then the restarts and how the last one ended (a crash loop caught
// between its backoffs shows as "not ready, 3 restarts, last exit 1").
func containerState(pod *corev1.Pod, ready bool) string {
	state := waitingReason(pod)
	switch {
	case state != "":
	case pod.Status.Phase == corev1.PodFailed:
		state = "Failed"
	case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "":
		state = "Pending"
	case ready:
		state = "ready, not yet available"
	default:
		state = "not ready"
	}
	if n := placement.Restarts(pod); n > 0 {
		state += fmt.Sprintf(", %d restarts", n)
		if code, ok := lastExitCode(pod); ok {
			state += fmt.Sprintf(", last exit %d", code)
		}
	}
	return state
}

// lastExitCode is the exit code of the last failed termination among the
// pod's containers, if any.
func lastExitCode(pod *corev1.Pod) (int32, bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if t := list[i].LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				return t.ExitCode, true
			}
		}
	}
	return 0, false
}

// failingPods returns the update revision's failing pods, by node name,
// and the earliest time a pod not failing yet would start failing by the
// deadline (zero if none), for a requeue. A pod fails when its containers
// restarted more than MaxRestarts times and it is at most RestartWindow
// old (restarts long after the update say nothing about the update), or
// when it is not available deadline after its creation. Only the nodes
// the rollout is about count: those that should run the set and serve.
// A node the lifecycle rule skips is not judged, except one that turned
// unreachable soon after its pod of the update revision arrived
// (placement.Lifecycle.FailedAfterUpdate): skipping it would let a
// revision that takes its nodes down roll on to all of them.
func failingPods(v *View, rules placement.FailurePolicy, deadline time.Duration) (failing []failingPod, next time.Time) {
	minReady := v.DS.Spec.MinReadySeconds
	for i := range v.Nodes {
		st := &v.Nodes[i]
		if st.Node == nil || (!st.Decision.ShouldRun && !st.Phase.Class.Skipped()) {
			continue
		}
		newPod, _, ok := splitByRevision(st.Pods, v.Hash)
		if !ok || newPod == nil {
			continue
		}
		// A pod updated in place is as old as its update, and its restarts
		// count from the update's own.
		since, restartsBefore := newPod.CreationTimestamp.Time, int32(0)
		if u := newPod.InPlace; u != nil {
			since, restartsBefore = u.Time, u.Restarts
		}
		if st.Phase.Class.Skipped() {
			if v.Lifecycle.FailedAfterUpdate(st.Phase, since) {
				failing = append(failing, failingPod{node: st.Name, pod: newPod.Name,
					state: fmt.Sprintf("node unreachable %s after the pod arrived: %s", st.Phase.Since.Sub(since).Truncate(time.Second), st.Phase.Reason)})
			}
			continue
		}
		age := v.Now.Sub(since)
		available := newPod.available(minReady, v.Now)
		switch {
		case placement.Restarts(newPod.Pod)-restartsBefore > rules.MaxRestarts && age <= rules.RestartWindow:
		case !available && age > deadline:
		default:
			if !available {
				if at := since.Add(deadline + time.Second); next.IsZero() || at.Before(next) {
					next = at
				}
			}
			continue
		}
		failing = append(failing, failingPod{node: st.Name, pod: newPod.Name, state: containerState(newPod.Pod, newPod.ready())})
	}
	sort.Slice(failing, func(i, j int) bool { return failing[i].node < failing[j].node })
	return failing, next
}

// describeFailing lists the first few failing pods and counts the rest.
func describeFailing(failing []failingPod) string {
	var parts []string
	for i, f := range failing {
		if i == maxNamedInMessage {
			parts = append(parts, fmt.Sprintf("and %d more", len(failing)-i))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}

// Verdict is where a set's rollout stands against its failure policy.
type Verdict struct {
	// failing are the update revision's failing pods (set only with
	// rollingUpdate.onFailure).
	failing []failingPod
	// Record is what status.rolloutFailure should say (nil: nothing).
	Record *everynodev1alpha1.RolloutFailure
	// stopped is true while the rollout is paused by a failure: the
	// rolling update replaces no pod, as when paused by hand.
	stopped bool
	// RollbackTo is the revision to put back (action Rollback, on the
	// sync that finds the failure); nil otherwise. A sync that does not
	// act leaves it to the next that does, and records nothing.
	RollbackTo *RevisionRef
	// Fresh is true on the sync that found the failure: the event and the
	// metric are for it.
	Fresh bool
	// next is when a pod would start failing by the deadline, for a requeue.
	next time.Time
}

// RevisionRef is a revision of the set known by its hash and number.
type RevisionRef struct {
	Hash   string
	Number int64
}

// judge decides the set's verdict. prev is the failure the status records;
// it stands while the update revision is the failed one (or the one a
// rollback went to) and the user has not resumed it; a new template clears
// it. A rollout stops when failedPods pods of the update revision fail and
// the user has not resumed this revision. A Rollback goes to the set's
// availableRevision if history still holds it, and pauses otherwise. A
// rollback is a write of the set, so only a sync that acts (v.acts) finds
// one; the others see the failing pods and wait for it.
func judge(v *View) *Verdict {
	ds := v.DS
	s := &v.Strategy
	out := &Verdict{}
	if s.OnFailure != nil {
		// A pass over every node on every sync: only for sets that ask.
		// ComputeStatus names the failing pods of the others only when
		// their progress deadline has passed.
		out.failing, out.next = failingPods(v, failureRules(s), s.ProgressDeadline)
	}
	resumed := ds.Annotations[everynodev1alpha1.AnnotationResumeRevision] == v.Hash

	if prev := ds.Status.RolloutFailure; prev != nil {
		switch {
		case prev.Revision == v.Hash && prev.Action == everynodev1alpha1.RolloutFailurePause && !resumed:
			out.Record, out.stopped = prev, true
			return out
		case prev.Action == everynodev1alpha1.RolloutFailureRollback && prev.RolledBackTo == v.Hash:
			// Rolling back: keep saying so until the template changes.
			out.Record = prev
			return out
		}
	}
	if s.OnFailure == nil || !s.RollingUpdate() || resumed || len(out.failing) < s.OnFailure.FailedPods {
		return out
	}

	rec := &everynodev1alpha1.RolloutFailure{
		Revision: v.Hash,
		Action:   everynodev1alpha1.RolloutFailurePause,
		Time:     metav1.NewTime(v.Now),
		Message: fmt.Sprintf("%d %s of revision %d failing: %s", len(out.failing), plural(len(out.failing), "pod", "pods"),
			v.revisions[v.Hash], describeFailing(out.failing)),
	}
	if s.OnFailure.Action == everynodev1alpha1.RolloutFailureRollback {
		target := ds.Status.AvailableRevision
		if n, ok := v.revisions[target]; ok && target != v.Hash {
			out.RollbackTo = &RevisionRef{Hash: target, Number: n}
			if !v.Acts {
				// Found, not yet recorded or reported: the sync that acts
				// does both.
				return out
			}
			rec.Action, rec.RolledBackTo = everynodev1alpha1.RolloutFailureRollback, target
			rec.Message += fmt.Sprintf("; rolled back to revision %d", n)
			out.Record, out.Fresh = rec, true
			return out
		}
		rec.Message += "; no earlier revision ran available on every node (or history no longer holds it), so the rollout paused instead of rolling back"
	}
	out.Record, out.stopped, out.Fresh = rec, true, true
	return out
}
