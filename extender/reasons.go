package extender

import (
	"fmt"
	"strings"
)

// Reasons a node fails the filter. They end up in the scheduler's
// FailedScheduling events, so they say what is wrong in the user's terms.
// Every one of them is also one that preemption cannot fix: evicting pods
// from a node neither moves a daemon pod's target, nor brings a node back,
// nor makes a daemon Ready.

func reasonNoTarget() string {
	return "everynode: daemon pod names no target node"
}

func reasonNoSet() string {
	return "everynode: daemon pod has no controlling everynode DaemonSet"
}

func reasonSetNotFound(setKey string) string {
	return fmt.Sprintf("everynode: DaemonSet %s of this daemon pod no longer exists", setKey)
}

func reasonOtherNode(target string) string {
	return fmt.Sprintf("everynode: daemon pod belongs to node %s", target)
}

func reasonNodeGone(target string) string {
	return fmt.Sprintf("everynode: target node %s no longer exists", target)
}

func reasonNotEligible(setKey, why string) string {
	return fmt.Sprintf("everynode: node no longer runs DaemonSet %s: %s", setKey, why)
}

func reasonDuplicate(setKey, podName string) string {
	return fmt.Sprintf("everynode: node already runs pod %s of DaemonSet %s", podName, setKey)
}

// reasonGated names every set that holds the node back, so a user who sees
// a pod Pending knows which daemon to look at. setKeys is sorted.
func reasonGated(setKeys []string) string {
	if len(setKeys) == 1 {
		return "everynode: node waits for the pod of DaemonSet " + setKeys[0] + " to be Ready (nodeReadinessGate)"
	}
	return "everynode: node waits for the pods of DaemonSets " + strings.Join(setKeys, ", ") + " to be Ready (nodeReadinessGate)"
}

// reasonAboveAllocatable: the pod asks more than the node holds in all, so
// preemption would evict pods for nothing (too lists "cpu 4 > 2").
func reasonAboveAllocatable(setKey string, too []string) string {
	return fmt.Sprintf("everynode: daemon pod of DaemonSet %s asks more than the node's allocatable (%s); no eviction makes room: lower the template's requests or the set's spec.nodeSizing (see its NodeSizingDoesNotFit condition)", setKey, strings.Join(too, ", "))
}
