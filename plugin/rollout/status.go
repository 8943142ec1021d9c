package rollout

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// Progress is where the rollout of a set stands, as kubectl's DaemonSet
// status viewer sees it, plus why it waits.
type Progress struct {
	// Message is kubectl's one-line status, without the trailing newline.
	Message string
	// Why holds one line per condition that explains a wait, as
	// "Progressing=False PodsPending: ...". Empty when done.
	Why []string
	// Done is true when the rollout is complete.
	Done bool
}

// String renders p as the lines `rollout status` prints.
func (p Progress) String() string {
	var b strings.Builder
	b.WriteString(p.Message)
	b.WriteByte('\n')
	for _, w := range p.Why {
		b.WriteString("  ")
		b.WriteString(w)
		b.WriteByte('\n')
	}
	return b.String()
}

// StatusOf says where the rollout of ds stands, in the order kubectl's
// DaemonSetStatusViewer checks it: the controller has observed the current
// generation, then every node runs an updated pod, then every updated pod
// is available. Two everynode additions: a rollout limited by partition or a
// canary nodeSelector is complete once the controller reports that nothing
// is left to update (Progressing=True RolloutComplete), as kubectl does for
// a partitioned StatefulSet; and while waiting, the Progressing and
// Available conditions say why. An OnDelete set has no rollout to follow:
// that is an error, as in kubectl.
func StatusOf(ds *everynodev1alpha1.DaemonSet) (Progress, error) {
	strategy := placement.UpdateStrategy(ds)
	if !strategy.RollingUpdate() {
		return Progress{}, fmt.Errorf("rollout status is only available for %s strategy type (daemon set %q uses %s)", appsv1.RollingUpdateDaemonSetStrategyType, ds.Name, strategy.Type)
	}
	st := &ds.Status
	if ds.Generation <= st.ObservedGeneration {
		// As kubectl for a Deployment past its deadline: waiting longer
		// would not help, say why and fail.
		if c := currentCondition(ds, everynodev1alpha1.ConditionProgressing); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == everynodev1alpha1.ReasonRolloutFailing || c.Reason == everynodev1alpha1.ReasonProgressDeadlineExceeded ||
				c.Reason == everynodev1alpha1.ReasonInvalidUpdateStrategy) {
			return Progress{Why: why(ds)}, fmt.Errorf("daemon set %q rollout stopped (%s): %s", ds.Name, c.Reason, c.Message)
		}
	}
	if ds.Generation > st.ObservedGeneration {
		return Progress{Message: "Waiting for daemon set spec update to be observed...", Why: why(ds)}, nil
	}
	partitioned := strategy.Limited()
	if st.UpdatedNumberScheduled < st.DesiredNumberScheduled && !(partitioned && nothingLeftToUpdate(ds)) {
		return Progress{
			Message: fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...", ds.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled),
			Why:     why(ds),
		}, nil
	}
	if st.NumberAvailable < st.DesiredNumberScheduled {
		return Progress{
			Message: fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...", ds.Name, st.NumberAvailable, st.DesiredNumberScheduled),
			Why:     why(ds),
		}, nil
	}
	if st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
		return Progress{
			Message: fmt.Sprintf("daemon set %q partitioned roll out complete: %d new pods have been updated (%d nodes kept on an older revision)...", ds.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled-st.UpdatedNumberScheduled),
			Done:    true,
		}, nil
	}
	return Progress{Message: fmt.Sprintf("daemon set %q successfully rolled out", ds.Name), Done: true}, nil
}

// nothingLeftToUpdate reports whether the controller, for the current
// generation, says the rollout has nothing left to do.
func nothingLeftToUpdate(ds *everynodev1alpha1.DaemonSet) bool {
	c := currentCondition(ds, everynodev1alpha1.ConditionProgressing)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == everynodev1alpha1.ReasonRolloutComplete
}

// currentCondition returns the condition of type t unless it describes an
// older generation than the spec (stale reasons would mislead).
func currentCondition(ds *everynodev1alpha1.DaemonSet, t string) *metav1.Condition {
	for i := range ds.Status.Conditions {
		c := &ds.Status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.ObservedGeneration != 0 && c.ObservedGeneration < ds.Generation {
			return nil
		}
		return c
	}
	return nil
}

// why returns the condition lines that explain a wait: Progressing always
// (its message says how far the rollout is and what holds it), Available
// only when False (when True it explains nothing).
func why(ds *everynodev1alpha1.DaemonSet) []string {
	var lines []string
	if c := currentCondition(ds, everynodev1alpha1.ConditionProgressing); c != nil {
		lines = append(lines, conditionLine(c))
	}
	if c := currentCondition(ds, everynodev1alpha1.ConditionAvailable); c != nil && c.Status == metav1.ConditionFalse {
		lines = append(lines, conditionLine(c))
	}
	return lines
}

func conditionLine(c *metav1.Condition) string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
