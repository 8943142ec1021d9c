package extender

import (
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"everynode.io/everynode/placement"
)

// preempt narrows the scheduler's preemption candidates. A daemon pod can
// only ever run on its target node, so victims elsewhere would be evicted
// for nothing: only the target's entry is kept, which lets a daemon pod
// pinned to a full node preempt lower-priority pods there (upstream
// kubernetes issue 140984). Other pods' candidates come back unchanged;
// nodes gated for them were already reported unresolvable by filter, so the
// scheduler does not offer them here.
//
// The answer is always NodeNameToMetaVictims (upstream converts it back to
// pods by UID). Nil entries are dropped: kube-scheduler dereferences every
// entry and every victim it gets back.
func preempt(args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	victims := args.NodeNameToMetaVictims
	if victims == nil && args.NodeNameToVictims != nil {
		victims = metaVictims(args.NodeNameToVictims)
	}
	out := make(map[string]*extenderv1.MetaVictims, len(victims))
	if placement.IsDaemonPod(args.Pod) {
		if target, ok := placement.TargetNode(args.Pod); ok {
			if v := cleanVictims(victims[target]); v != nil {
				out[target] = v
			}
		}
		return &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: out}
	}
	for node, v := range victims {
		if v := cleanVictims(v); v != nil {
			out[node] = v
		}
	}
	return &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: out}
}

// cleanVictims returns v without nil pods, or nil if v is nil. It copies
// only when there is something to drop.
func cleanVictims(v *extenderv1.MetaVictims) *extenderv1.MetaVictims {
	if v == nil {
		return nil
	}
	for _, p := range v.Pods {
		if p == nil {
			pods := make([]*extenderv1.MetaPod, 0, len(v.Pods))
			for _, p := range v.Pods {
				if p != nil {
					pods = append(pods, p)
				}
			}
			return &extenderv1.MetaVictims{Pods: pods, NumPDBViolations: v.NumPDBViolations}
		}
	}
	return v
}

// metaVictims turns full victims (sent by a scheduler configured without
// nodeCacheCapable) into the UID form the result carries, as upstream's
// convertToMetaVictims does.
func metaVictims(in map[string]*extenderv1.Victims) map[string]*extenderv1.MetaVictims {
	out := make(map[string]*extenderv1.MetaVictims, len(in))
	for node, v := range in {
		if v == nil {
			continue
		}
		mv := &extenderv1.MetaVictims{Pods: make([]*extenderv1.MetaPod, 0, len(v.Pods)), NumPDBViolations: v.NumPDBViolations}
		for _, pod := range v.Pods {
			if pod != nil {
				mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(pod.UID)})
			}
		}
		out[node] = mv
	}
	return out
}
