package plan

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// rollout sums up, per node that should run the set, where the update
// stands.
type rollout struct {
	// pending counts nodes still to be brought to an available pod of the
	// update revision.
	pending int
	// held counts nodes the policy keeps on an old revision, by why.
	held [numHolds]int
}

// revisionNumbers maps the hashes of a set's revisions to their numbers.
func revisionNumbers(cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision) map[string]int64 {
	revisions := make(map[string]int64, len(old)+1)
	for _, r := range old {
		revisions[r.Labels[revision.HashLabel]] = r.Revision
	}
	revisions[cur.Labels[revision.HashLabel]] = cur.Revision
	return revisions
}

// StatusReport is what the status pass finds in a sync's view.
type StatusReport struct {
	Status everynodev1alpha1.DaemonSetStatus
	// AtRest: every node that should run the set has an available pod of
	// the update revision, or one the policy keeps on an older revision.
	AtRest bool
	// Recheck is the earliest time the status changes with no event to
	// say so: a pod turning available after minReadySeconds, the progress
	// deadline passing, a pod of the update revision starting to fail by
	// its deadline. Zero if none.
	Recheck time.Time
}

// tally is the pass over the view's nodes that the status counts from.
type tally struct {
	ro       rollout
	ts       troubles
	excluded taintExclusions
	// skipped names the set's nodes the lifecycle rule leaves out, by
	// class (placement.NodeClass).
	skipped [placement.NumNodeClasses]namedCount
	// nextAvailable is when the next ready pod becomes available (zero if
	// none).
	nextAvailable time.Time
}

// ComputeStatus is the set's status as seen in v, as upstream
// updateDaemonSetStatus counts it (per node, from its oldest pod), plus
// everynode's revisions and conditions. Only a sync that acts on the
// current spec (v.acts) raises observedGeneration.
func ComputeStatus(v *View) StatusReport {
	ds, vd := v.DS, v.Verdict
	st := everynodev1alpha1.DaemonSetStatus{
		ObservedGeneration: ds.Status.ObservedGeneration,
		CollisionCount:     ds.Status.CollisionCount,
		UpdateRevision:     v.Hash,
		Conditions:         append([]metav1.Condition(nil), ds.Status.Conditions...),
		AvailableRevision:  ds.Status.AvailableRevision,
		ProgressTime:       ds.Status.ProgressTime,
		RolloutFailure:     vd.Record,
	}
	if v.Acts {
		st.ObservedGeneration = ds.Generation
	}
	t := countNodes(v, &st)
	st.SkippedNodes = t.skippedNodes()
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	st.CurrentRevision = currentRevision(v)
	if t.ro.pending == 0 && st.DesiredNumberScheduled > 0 && st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled {
		st.AvailableRevision = v.Hash
	}

	now := metav1.NewTime(v.Now)
	halted := v.Policy.halted()
	if madeProgress(&ds.Status, &st, halted) {
		st.ProgressTime = &now
	}
	dl := deadlineOf(v, &st, &t.ro)
	recheck := earliest(t.nextAvailable, dl.at)
	if v.Strategy.OnFailure != nil && !halted {
		recheck = earliest(recheck, vd.next)
	}
	meta.SetStatusCondition(&st.Conditions, availableCondition(&st, &t.ts, now))
	failing := vd.failing
	if dl.exceeded && failing == nil {
		failing, _ = failingPods(v, failureRules(&v.Strategy), v.Strategy.ProgressDeadline)
	}
	meta.SetStatusCondition(&st.Conditions, progressingCondition(&st, t, v.Policy, vd, failing, dl, now))
	if len(ds.Spec.NodeSizing) > 0 {
		sizing := v.Sizing()
		st.NodeSizing = &sizing.Status
		reason := ""
		if len(sizing.DoesNotFit) > 0 {
			reason = everynodev1alpha1.ReasonRequestsAboveAllocatable
		}
		setWarning(&st, everynodev1alpha1.ConditionNodeSizingDoesNotFit, reason, DoesNotFitMessage(sizing.DoesNotFit), now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, everynodev1alpha1.ConditionNodeSizingDoesNotFit)
	}
	if c, ok := t.excluded.condition(st.ObservedGeneration, now); ok {
		meta.SetStatusCondition(&st.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, everynodev1alpha1.ConditionNodesExcluded)
	}
	return StatusReport{Status: st, AtRest: t.ro.pending == 0, Recheck: recheck}
}

// countNodes counts the nodes of v into st's numbers, and tallies where
// the rollout stands and why nodes lack an available pod.
func countNodes(v *View, st *everynodev1alpha1.DaemonSetStatus) *tally {
	t := &tally{}
	minReady := v.DS.Spec.MinReadySeconds
	for i := range v.Nodes {
		ns := &v.Nodes[i]
		if ns.Node == nil {
			// Pods on gone nodes are being deleted; upstream counts only
			// existing nodes too.
			continue
		}
		scheduled := len(ns.Pods) > 0
		class := ns.Phase.Class
		if class.Skipped() && (ns.Decision.ShouldRun || scheduled) {
			t.skipped[class].add(ns.Name)
		}
		if !ns.Decision.ShouldRun {
			if scheduled {
				st.NumberMisscheduled++
			}
			t.excluded.add(v.DS, ns)
			continue
		}
		st.DesiredNumberScheduled++
		if !scheduled {
			if class.Skipped() {
				t.ro.held[lifecycleHold[class]]++
			} else {
				t.ro.pending++
			}
			if !NodeReady(ns.Node) {
				t.ts.add(troubleNodeNotReady, ns.Name)
			} else {
				t.ts.add(troubleMissing, ns.Name)
			}
			continue
		}
		st.CurrentNumberScheduled++
		pod := ns.Pods[0]
		ready := pod.ready()
		available := false
		if ready {
			st.NumberReady++
			if pod.available(minReady, v.Now) {
				available = true
				st.NumberAvailable++
			}
		}
		if minReady > 0 {
			// Any pod of the node turning available matters, not only the
			// oldest: a surge pod's availability frees its old pod.
			for j := range ns.Pods {
				if at, ok := ns.Pods[j].availableAt(minReady); ok && at.After(v.Now) {
					t.nextAvailable = earliest(t.nextAvailable, at)
				}
			}
		}
		if !available {
			tr := classify(ns.Node, pod.Pod, ready)
			name := pod.Name
			if troubleInfo[tr].nodes {
				name = ns.Name
			}
			t.ts.add(tr, name)
		}
		updated := pod.updated(v.Hash)
		if updated {
			st.UpdatedNumberScheduled++
		}
		switch h := v.holdOf(ns); {
		case updated && available:
		case h != holdNone && (!updated || class.Skipped()):
			// A skipped node's new pod that is not available holds the
			// rollout no more than its old one would.
			t.ro.held[h]++
		default:
			t.ro.pending++
		}
	}
	return t
}

// skippedNodes is the status's count of skipped nodes, nil if none.
func (t *tally) skippedNodes() *everynodev1alpha1.SkippedNodes {
	s := everynodev1alpha1.SkippedNodes{
		Unreachable:  int32(t.skipped[placement.NodeUnreachable].count),
		Leaving:      int32(t.skipped[placement.NodeLeaving].count),
		ShuttingDown: int32(t.skipped[placement.NodeShuttingDown].count),
	}
	if s == (everynodev1alpha1.SkippedNodes{}) {
		return nil
	}
	return &s
}

// skippedWhat is the Progressing message's part on skipped nodes, such as
// "; skipped: 2 unreachable (node-3, node-7), 1 leaving (node-9)".
func (t *tally) skippedWhat() string {
	var parts []string
	for _, c := range []placement.NodeClass{placement.NodeUnreachable, placement.NodeLeaving, placement.NodeShuttingDown} {
		if n := &t.skipped[c]; n.count > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n.count, skippedWord[c], n.String()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; skipped, not replaced: " + strings.Join(parts, ", ")
}

var skippedWord = [placement.NumNodeClasses]string{
	placement.NodeUnreachable:  "unreachable",
	placement.NodeLeaving:      "leaving",
	placement.NodeShuttingDown: "shutting down",
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// currentRevision returns the hash of the oldest revision that a live pod
// of the set still runs, or the update revision if none.
func currentRevision(v *View) string {
	oldest, oldestNum := v.Hash, v.revisions[v.Hash]
	// v.pods leaves out only pods both deleted and finished: none active.
	for i := range v.Pods {
		pod := v.Pods[i]
		if !pod.active() {
			continue
		}
		if num, ok := v.revisions[pod.Hash]; ok && num < oldestNum {
			oldest, oldestNum = pod.Hash, num
		}
	}
	return oldest
}

func availableCondition(st *everynodev1alpha1.DaemonSetStatus, ts *troubles, now metav1.Time) metav1.Condition {
	c := metav1.Condition{
		Type:               everynodev1alpha1.ConditionAvailable,
		ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: now,
	}
	if st.NumberAvailable >= st.DesiredNumberScheduled {
		c.Status = metav1.ConditionTrue
		c.Reason = everynodev1alpha1.ReasonAllPodsAvailable
		c.Message = fmt.Sprintf("%d of %d nodes run an available pod", st.NumberAvailable, st.DesiredNumberScheduled)
		return c
	}
	c.Status = metav1.ConditionFalse
	c.Reason = everynodev1alpha1.ReasonPodsNotReady
	if t, ok := ts.first(false); ok {
		c.Reason = troubleInfo[t].reason
	}
	c.Message = fmt.Sprintf("%d of %d nodes have no available pod: %s", st.NumberUnavailable, st.DesiredNumberScheduled, ts.summary())
	return c
}

// madeProgress reports whether the rollout moved since the status before:
// a new update revision, a node gaining an updated pod, a pod turning
// available, or a resume (or a strategy fixed). The progress deadline counts from the last such
// moment. Counts that only go down (pods deleted for the update) are not
// progress.
func madeProgress(old, st *everynodev1alpha1.DaemonSetStatus, halted bool) bool {
	if old.ProgressTime == nil || old.UpdateRevision != st.UpdateRevision ||
		st.UpdatedNumberScheduled > old.UpdatedNumberScheduled || st.NumberAvailable > old.NumberAvailable {
		return true
	}
	if halted {
		return false
	}
	c := meta.FindStatusCondition(old.Conditions, everynodev1alpha1.ConditionProgressing)
	return c != nil && (c.Reason == everynodev1alpha1.ReasonPaused || c.Reason == everynodev1alpha1.ReasonRolloutFailing ||
		c.Reason == everynodev1alpha1.ReasonInvalidUpdateStrategy)
}

// deadline is the progress deadline of a rollout under way: exceeded, or
// when it will be (zero when it does not apply: no rollout under way, a
// halted policy, or not a rolling update).
type deadline struct {
	exceeded bool
	at       time.Time
	limit    time.Duration
}

func deadlineOf(v *View, st *everynodev1alpha1.DaemonSetStatus, ro *rollout) deadline {
	if v.Policy.halted() || ro.pending == 0 || !v.Strategy.RollingUpdate() || st.ProgressTime == nil {
		return deadline{}
	}
	limit := v.Strategy.ProgressDeadline
	at := st.ProgressTime.Add(limit)
	if v.Now.After(at) {
		return deadline{exceeded: true, limit: limit}
	}
	// The extra second absorbs clock skew, as for minReadySeconds.
	return deadline{at: at.Add(time.Second), limit: limit}
}

// progressingCondition is the Progressing condition; failing names the
// update revision's failing pods for a deadline that passed.
func progressingCondition(st *everynodev1alpha1.DaemonSetStatus, t *tally, pol *Policy, vd *Verdict, failing []failingPod, dl deadline, now metav1.Time) metav1.Condition {
	ts, ro := &t.ts, &t.ro
	c := metav1.Condition{
		Type:               everynodev1alpha1.ConditionProgressing,
		ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: now,
		Status:             metav1.ConditionTrue,
	}
	progress := fmt.Sprintf("%d of %d nodes run revision %s", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.UpdateRevision)
	held := ""
	if n := ro.held[holdPartition]; n > 0 {
		held += fmt.Sprintf("; %d kept on an older revision by partition", n)
	}
	if n := ro.held[holdCanary]; n > 0 {
		held += fmt.Sprintf("; %d outside the canary nodeSelector", n)
	}
	held += t.skippedWhat()
	rec := vd.Record
	switch {
	case vd.stopped:
		c.Status = metav1.ConditionFalse
		c.Reason = everynodev1alpha1.ReasonRolloutFailing
		c.Message = fmt.Sprintf("rollout paused itself: %s; %s; `kubectl everynode rollout resume` goes on anyway, a new template replaces the revision", rec.Message, progress)
	case pol.Invalid != nil:
		c.Status = metav1.ConditionFalse
		c.Reason = everynodev1alpha1.ReasonInvalidUpdateStrategy
		c.Message = fmt.Sprintf("no pod is replaced: %v; %s; %d wait on an older revision", pol.Invalid, progress, ro.held[holdInvalid])
	case ro.held[holdPaused] > 0:
		c.Status = metav1.ConditionFalse
		c.Reason = everynodev1alpha1.ReasonPaused
		c.Message = fmt.Sprintf("rollout paused: %s; %d wait on an older revision", progress, ro.held[holdPaused])
	case dl.exceeded:
		c.Status = metav1.ConditionFalse
		c.Reason = everynodev1alpha1.ReasonProgressDeadlineExceeded
		waiting := ts.summary()
		if len(failing) > 0 {
			waiting = describeFailing(failing)
		}
		c.Message = fmt.Sprintf("no progress for %s (progressDeadlineSeconds): %s%s; %s", dl.limit, progress, held, waiting)
	case rec != nil && rec.Action == everynodev1alpha1.RolloutFailureRollback && rec.RolledBackTo == st.UpdateRevision && ro.pending > 0:
		c.Reason = everynodev1alpha1.ReasonRolledBack
		c.Message = fmt.Sprintf("rolling back: %s; %s", rec.Message, progress)
	case ro.pending == 0 && ro.held[holdOnDelete] > 0:
		c.Reason = everynodev1alpha1.ReasonOnDelete
		c.Message = fmt.Sprintf("%s; %d run an older revision until their pod is deleted", progress, ro.held[holdOnDelete])
	case ro.pending == 0:
		c.Reason = everynodev1alpha1.ReasonRolloutComplete
		c.Message = progress + held
	default:
		if t, ok := ts.first(true); ok {
			c.Status = metav1.ConditionFalse
			c.Reason = troubleInfo[t].reason
			c.Message = fmt.Sprintf("rollout waiting: %s%s; %s", progress, held, ts.summary())
			break
		}
		c.Reason = everynodev1alpha1.ReasonRollingUpdate
		c.Message = progress + held
		if s := ts.summary(); s != "" {
			c.Message += "; waiting for " + s
		}
	}
	return c
}

// SetReadinessGateInactive sets or removes the NodeReadinessGateInactive
// condition in st: True when ds asks for spec.nodeReadinessGate and mode
// (placement.ReadinessGateMode) cannot enforce it. It returns the
// condition when set.
func SetReadinessGateInactive(st *everynodev1alpha1.DaemonSetStatus, ds *everynodev1alpha1.DaemonSet, mode placement.GateMode, now metav1.Time) *metav1.Condition {
	if !ds.Spec.NodeReadinessGate || mode != placement.GateInactive {
		return setWarning(st, everynodev1alpha1.ConditionNodeReadinessGateInactive, "", "", now)
	}
	return setWarning(st, everynodev1alpha1.ConditionNodeReadinessGateInactive, everynodev1alpha1.ReasonExtenderSeesDaemonPodsOnly,
		"spec.nodeReadinessGate "+placement.GateInactiveMessage(), now)
}

// setWarning sets a True condition of type in st with reason and message,
// or removes it when reason is "", and returns it when set: the shape of
// the conditions that only warn (they hold nothing back).
func setWarning(st *everynodev1alpha1.DaemonSetStatus, typ, reason, message string, now metav1.Time) *metav1.Condition {
	if reason == "" {
		meta.RemoveStatusCondition(&st.Conditions, typ)
		return nil
	}
	c := metav1.Condition{
		Type:               typ,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: now,
		Reason:             reason,
		Message:            message,
	}
	meta.SetStatusCondition(&st.Conditions, c)
	return &c
}

// SetDaemonResourceFallback sets or removes the DaemonResourceFallback
// condition in st: True while fallback (placement.DaemonResourceFallback:
// the controller turned the daemon-pod marker, resource, off because
// kube-scheduler does not ignore it). Every set gets it, not only those
// whose pods were stuck: the protection the marker gave was the whole
// cluster's. It returns the condition when set.
func SetDaemonResourceFallback(st *everynodev1alpha1.DaemonSetStatus, fallback bool, resource string, now metav1.Time) *metav1.Condition {
	if !fallback {
		return setWarning(st, everynodev1alpha1.ConditionDaemonResourceFallback, "", "", now)
	}
	return setWarning(st, everynodev1alpha1.ConditionDaemonResourceFallback, everynodev1alpha1.ReasonDaemonResourceNotIgnored,
		DaemonResourceFallbackMessage(resource), now)
}

// DaemonResourceFallbackMessage says what the fallback from the daemon-pod
// marker resource means and how to undo it, for the condition, the event
// and the log.
func DaemonResourceFallbackMessage(resource string) string {
	return fmt.Sprintf("kube-scheduler does not ignore the daemon-pod marker resource %s (daemon pods stayed Pending with \"Insufficient %s\"), "+
		"so everynode stopped marking daemon pods and replaces the stuck ones without it; ordinary pods again wait for everynode's "+
		"scheduler extender when everynode hangs, wherever kube-scheduler calls the extender for every pod. To restore the protection, "+
		"regenerate the scheduler configuration with `everynode scheduler-config` (managedResources [{name: %s, ignoredByScheduler: true}]), "+
		"restart kube-scheduler, then restart everynode; or keep the marker off for good with scheduler.daemonResource=\"\" "+
		"(everynode serve --daemon-resource=\"\")", resource, resource, resource)
}

// MarkerNotIgnoredAppeared returns cur's Available condition when it
// reports that kube-scheduler does not ignore the daemon-pod marker and
// old's did not: the moment for a Warning event, once, not on every
// write.
func MarkerNotIgnoredAppeared(old, cur *everynodev1alpha1.DaemonSetStatus) *metav1.Condition {
	c := meta.FindStatusCondition(cur.Conditions, everynodev1alpha1.ConditionAvailable)
	if c == nil || c.Reason != everynodev1alpha1.ReasonDaemonResourceNotIgnored {
		return nil
	}
	if o := meta.FindStatusCondition(old.Conditions, everynodev1alpha1.ConditionAvailable); o != nil && o.Reason == c.Reason {
		return nil
	}
	return c
}

// SetWebhooksSkipped sets or removes the WebhooksSkipped condition in st:
// True when the set's namespace is one the webhooks skip (skipped) and the
// set uses a feature whose checks only a webhook makes. The CRD's schema
// defaults and CEL rules hold everywhere, and the controller pins,
// tolerates and applies nodeOverrides itself; what is left is checking a
// node override's patch (a strategic merge patch: no CEL rule can apply
// one), so an override there that does not apply, or that would change
// eligibility, is refused per pod (FailedCreate) instead of when the set
// is stored. (The pod webhook's --scheduler-name is the operator's choice
// for every set, not a feature of this one.) It returns the condition
// when set.
func SetWebhooksSkipped(st *everynodev1alpha1.DaemonSetStatus, ds *everynodev1alpha1.DaemonSet, skipped bool, now metav1.Time) *metav1.Condition {
	if !skipped || len(ds.Spec.NodeOverrides) == 0 {
		return setWarning(st, everynodev1alpha1.ConditionWebhooksSkipped, "", "", now)
	}
	return setWarning(st, everynodev1alpha1.ConditionWebhooksSkipped, everynodev1alpha1.ReasonNodeOverridesUnchecked, fmt.Sprintf("spec.nodeOverrides (%d) are applied but were not checked when the set was stored: the everynode webhooks skip namespace %s "+
		"so that an everynode outage cannot block it; an override that does not apply, or that changes tolerations, nodeSelector or node affinity, "+
		"fails each pod create (FailedCreate events) instead of the set's update; move the set to another namespace to have them checked",
		len(ds.Spec.NodeOverrides), ds.Namespace), now)
}
