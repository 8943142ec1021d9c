package placement

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// apps/v1's defaults for the fields of a set that every part reads. The
// defaulting webhook writes them into the set; the readers below assume them
// where it has not run (webhooks skip kube-system by design).
const (
	DefaultRevisionHistoryLimit int32 = 10
	DefaultMaxUnavailable       int32 = 1
	DefaultMaxSurge             int32 = 0
	// Deployments' default.
	DefaultProgressDeadlineSeconds int32 = 600

	// rollingUpdate.onFailure's defaults: the first updated pod that
	// crash-loops past three restarts, or is not available at the
	// progress deadline, stops the rollout.
	DefaultFailedPods           int32 = 1
	DefaultMaxRestarts          int32 = 3
	DefaultRestartWindowSeconds int32 = 600

	// DefaultInPlaceGatePolicy is rollingUpdate.inPlaceGatePolicy's
	// default: Always, what inPlaceReadinessGate's default true did.
	// IfServed is not the default: a pod made before a Service selected it
	// has no gate to close, and the EndpointSlice cache may lag a listing.
	DefaultInPlaceGatePolicy = everynodev1alpha1.InPlaceGateAlways
)

// Strategy is a set's update strategy as the controller, the extender and
// the kubectl plugin read it: apps/v1's defaults applied, so an empty type
// reads as RollingUpdate everywhere. Build it with UpdateStrategy.
type Strategy struct {
	// Type is the strategy type, RollingUpdate when the set leaves it
	// empty. Only RollingUpdate replaces pods; OnDelete, and any other
	// type validation would have refused, leaves old pods until someone
	// deletes them, as upstream's controller does.
	Type appsv1.DaemonSetUpdateStrategyType
	// MaxUnavailable and MaxSurge are as set, or their defaults.
	MaxUnavailable intstr.IntOrString
	MaxSurge       intstr.IntOrString
	// Partition, NodeSelector (the canary) and Paused are everynode's own
	// limits on which pods a rolling update replaces; zero values limit
	// nothing.
	Partition    *intstr.IntOrString
	NodeSelector *metav1.LabelSelector
	Paused       bool
	// OnFailure is rollingUpdate.onFailure with defaults applied; nil when
	// the set has none (its rollout never stops itself).
	OnFailure *FailurePolicy
	// ProgressDeadline is spec.progressDeadlineSeconds, or its default.
	ProgressDeadline time.Duration
	// PodUpdate is rollingUpdate.podUpdatePolicy, Recreate when unset.
	PodUpdate everynodev1alpha1.PodUpdatePolicy
	// GatePolicy is rollingUpdate.inPlaceGatePolicy, else what the
	// deprecated inPlaceReadinessGate says (true Always, false Never),
	// else Always. It matters only with InPlace; read the decisions it
	// makes with GatesNewPod and ClosesGate.
	GatePolicy everynodev1alpha1.InPlaceGatePolicy
}

// FailurePolicy is rollingUpdate.onFailure with its defaults applied.
type FailurePolicy struct {
	Action        everynodev1alpha1.RolloutFailureAction
	FailedPods    int
	MaxRestarts   int32
	RestartWindow time.Duration
}

// UpdateStrategy returns the update strategy of ds with defaults applied.
// ds is not modified.
func UpdateStrategy(ds *everynodev1alpha1.DaemonSet) Strategy {
	s := Strategy{
		Type:             ds.Spec.UpdateStrategy.Type,
		MaxUnavailable:   intstr.FromInt32(DefaultMaxUnavailable),
		MaxSurge:         intstr.FromInt32(DefaultMaxSurge),
		ProgressDeadline: seconds(ds.Spec.ProgressDeadlineSeconds, DefaultProgressDeadlineSeconds),
		PodUpdate:        everynodev1alpha1.PodUpdateRecreate,
		GatePolicy:       DefaultInPlaceGatePolicy,
	}
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			s.MaxUnavailable = *ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			s.MaxSurge = *ru.MaxSurge
		}
		s.Partition, s.NodeSelector, s.Paused = ru.Partition, ru.NodeSelector, ru.Paused
		if ru.PodUpdatePolicy != "" {
			s.PodUpdate = ru.PodUpdatePolicy
		}
		s.GatePolicy = inPlaceGatePolicy(ru)
		if f := ru.OnFailure; f != nil {
			s.OnFailure = &FailurePolicy{
				Action:        f.Action,
				FailedPods:    int(ptr.Deref(f.FailedPods, DefaultFailedPods)),
				MaxRestarts:   ptr.Deref(f.MaxRestarts, DefaultMaxRestarts),
				RestartWindow: seconds(f.RestartWindowSeconds, DefaultRestartWindowSeconds),
			}
			if s.OnFailure.Action == "" {
				s.OnFailure.Action = everynodev1alpha1.RolloutFailurePause
			}
		}
	}
	return s
}

// inPlaceGatePolicy reads rollingUpdate's gate policy: the field, else
// the deprecated boolean, else the default. Validation refuses the two
// fields set to disagree; where it has not run, the newer field wins.
func inPlaceGatePolicy(ru *everynodev1alpha1.RollingUpdateDaemonSet) everynodev1alpha1.InPlaceGatePolicy {
	switch {
	case ru.InPlaceGatePolicy != "":
		return ru.InPlaceGatePolicy
	case ru.InPlaceReadinessGate == nil:
		return DefaultInPlaceGatePolicy
	case *ru.InPlaceReadinessGate:
		return everynodev1alpha1.InPlaceGateAlways
	default:
		return everynodev1alpha1.InPlaceGateNever
	}
}

func seconds(v *int32, def int32) time.Duration {
	return time.Duration(ptr.Deref(v, def)) * time.Second
}

// RollingUpdate reports whether the controller replaces old pods by itself.
func (s *Strategy) RollingUpdate() bool {
	return s.Type == appsv1.RollingUpdateDaemonSetStrategyType
}

// Limits returns maxSurge and maxUnavailable scaled to desired nodes
// (percentages rounded up), as upstream's updatedDesiredNodeCounts: both 0
// unless the strategy is a rolling update, and maxUnavailable 1 when both
// come out 0 on a non-empty cluster (an impossible configuration that
// validation refuses).
func (s *Strategy) Limits(desired int) (maxSurge, maxUnavailable int, err error) {
	if !s.RollingUpdate() {
		return 0, 0, nil
	}
	if maxSurge, err = intstr.GetScaledValueFromIntOrPercent(&s.MaxSurge, desired, true); err != nil {
		return 0, 0, fmt.Errorf("invalid rollingUpdate.maxSurge %q: %w", s.MaxSurge.String(), err)
	}
	if maxUnavailable, err = intstr.GetScaledValueFromIntOrPercent(&s.MaxUnavailable, desired, true); err != nil {
		return 0, 0, fmt.Errorf("invalid rollingUpdate.maxUnavailable %q: %w", s.MaxUnavailable.String(), err)
	}
	if desired > 0 && maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable, nil
}

// AllowsSurge reports whether a node may hold an old and a new pod of the
// set at once during an update, as upstream's util.AllowsSurge: a rolling
// update whose maxSurge is positive. An unparsable maxSurge allows none.
func (s *Strategy) AllowsSurge() bool {
	if !s.RollingUpdate() {
		return false
	}
	// Scaled against one node, rounding up, any positive number or
	// percentage is at least 1.
	n, err := intstr.GetScaledValueFromIntOrPercent(&s.MaxSurge, 1, true)
	return err == nil && n > 0
}

// Kept returns how many of desired nodes the partition keeps on their old
// revision (percentages rounded up).
func (s *Strategy) Kept(desired int) (int, error) {
	if s.Partition == nil {
		return 0, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(s.Partition, desired, true)
	if err != nil {
		return 0, fmt.Errorf("invalid rollingUpdate.partition %q: %w", s.Partition.String(), err)
	}
	return n, nil
}

// Limited reports whether the strategy keeps some nodes on an older
// revision on purpose: a canary node selector, or a partition that is not
// zero. A partition that does not parse counts as limiting, so a reader
// waits for the controller's word rather than assume the whole fleet.
func (s *Strategy) Limited() bool {
	if s.NodeSelector != nil {
		return true
	}
	n, err := s.Kept(100)
	return err != nil || n > 0
}

// RevisionHistoryLimit is how many old revisions of ds to keep.
func RevisionHistoryLimit(ds *everynodev1alpha1.DaemonSet) int {
	if ds.Spec.RevisionHistoryLimit == nil {
		return int(DefaultRevisionHistoryLimit)
	}
	return int(*ds.Spec.RevisionHistoryLimit)
}
