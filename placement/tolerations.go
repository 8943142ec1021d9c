package placement

import (
	corev1 "k8s.io/api/core/v1"
)

// daemonTolerations are the tolerations upstream's DaemonSet controller adds
// to every daemon pod (AddOrUpdateDaemonPodTolerations): a daemon must
// survive taint-based eviction when its node turns NotReady or unreachable,
// and must still land on nodes under resource pressure or cordoned.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added only to hostNetwork pods: they do not need
// the pod network, so they may run before the node's network is ready (this
// is how CNI agents themselves get scheduled).
var hostNetworkToleration = corev1.Toleration{
	Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// startupTaint is the key of the startup taint everynode removes from a
// new node once the pods of every set with nodeReadinessGate are Ready
// there (controller/startup.go); empty when that mode is off. Every daemon
// pod tolerates it: daemons are what the node waits for.
var startupTaint string

// SetStartupTaint turns the startup-taint readiness gate on with key (a
// NoSchedule taint nodes register with), or off with "". Set once, at
// start, before any pod is made or node judged: the pods the controller
// makes, the pod webhook's stamp and eligibility all read it.
func SetStartupTaint(key string) { startupTaint = key }

// StartupTaint returns the startup taint's key, "" when the gate is off.
func StartupTaint() string { return startupTaint }

// DaemonTolerations returns the default daemon tolerations for a pod with
// the given hostNetwork setting, as a new slice.
func DaemonTolerations(hostNetwork bool) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(daemonTolerations)+2)
	out = append(out, daemonTolerations...)
	if hostNetwork {
		out = append(out, hostNetworkToleration)
	}
	if startupTaint != "" {
		out = append(out, corev1.Toleration{Key: startupTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// WithDaemonTolerations returns tolerations with the default daemon
// tolerations added or updated, as upstream's AddOrUpdateTolerationInPodSpec
// does: a toleration that matches a default one by key, operator, value and
// effect is replaced by it (so a user's tolerationSeconds on, say, not-ready
// does not let the node lifecycle controller evict a daemon); all others are
// kept in order. The input is not modified. Applying it twice gives the same
// result, which keeps the pod webhook idempotent when reinvoked.
func WithDaemonTolerations(tolerations []corev1.Toleration, hostNetwork bool) []corev1.Toleration {
	out := make([]corev1.Toleration, len(tolerations), len(tolerations)+len(daemonTolerations)+1)
	copy(out, tolerations)
	for _, def := range DaemonTolerations(hostNetwork) {
		out = addOrUpdateToleration(out, def)
	}
	return out
}

func addOrUpdateToleration(tolerations []corev1.Toleration, t corev1.Toleration) []corev1.Toleration {
	replaced := false
	kept := tolerations[:0]
	for _, existing := range tolerations {
		if existing.MatchToleration(&t) {
			if !replaced {
				kept = append(kept, t)
				replaced = true
			}
			continue
		}
		kept = append(kept, existing)
	}
	if !replaced {
		kept = append(kept, t)
	}
	return kept
}
