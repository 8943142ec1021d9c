package extender

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func TestPreempt(t *testing.T) {
	agent := daemonSet("agent", false)
	victims := func(uids ...string) *extenderv1.MetaVictims {
		v := &extenderv1.MetaVictims{Pods: []*extenderv1.MetaPod{}, NumPDBViolations: 1}
		for _, uid := range uids {
			v.Pods = append(v.Pods, &extenderv1.MetaPod{UID: uid})
		}
		return v
	}
	candidates := func() map[string]*extenderv1.MetaVictims {
		return map[string]*extenderv1.MetaVictims{"n0": victims("a"), "n1": victims("b", "c"), "n2": victims("d")}
	}
	tests := map[string]struct {
		args *extenderv1.ExtenderPreemptionArgs
		want map[string]*extenderv1.MetaVictims
	}{
		"daemon pod: only the target's victims": {
			args: &extenderv1.ExtenderPreemptionArgs{Pod: daemonPod(agent, "agent-1", "n1", "v1"), NodeNameToMetaVictims: candidates()},
			want: map[string]*extenderv1.MetaVictims{"n1": victims("b", "c")},
		},
		"daemon pod: target not a candidate": {
			args: &extenderv1.ExtenderPreemptionArgs{Pod: daemonPod(agent, "agent-1", "n9", "v1"), NodeNameToMetaVictims: candidates()},
			want: map[string]*extenderv1.MetaVictims{},
		},
		"daemon pod: full victims converted to UIDs": {
			args: &extenderv1.ExtenderPreemptionArgs{
				Pod: daemonPod(agent, "agent-1", "n1", "v1"),
				NodeNameToVictims: map[string]*extenderv1.Victims{
					"n0": {Pods: []*corev1.Pod{{}}},
					"n1": {Pods: []*corev1.Pod{podWithUID("b"), podWithUID("c")}, NumPDBViolations: 1},
				},
			},
			want: map[string]*extenderv1.MetaVictims{"n1": victims("b", "c")},
		},
		"other pod: unchanged": {
			args: &extenderv1.ExtenderPreemptionArgs{Pod: plainPod(), NodeNameToMetaVictims: candidates()},
			want: candidates(),
		},
		"other pod: nil entries dropped": {
			args: &extenderv1.ExtenderPreemptionArgs{Pod: plainPod(), NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n0": nil,
				"n1": {Pods: []*extenderv1.MetaPod{nil, {UID: "b"}, {UID: "c"}}, NumPDBViolations: 1},
			}},
			want: map[string]*extenderv1.MetaVictims{"n1": victims("b", "c")},
		},
		"no victims at all": {
			args: &extenderv1.ExtenderPreemptionArgs{Pod: plainPod()},
			want: map[string]*extenderv1.MetaVictims{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := preempt(tc.args)
			if got.NodeNameToMetaVictims == nil {
				t.Fatal("NodeNameToMetaVictims is nil")
			}
			if !apiequality.Semantic.DeepEqual(got.NodeNameToMetaVictims, tc.want) {
				t.Errorf("NodeNameToMetaVictims = %s, want %s", dumpVictims(got.NodeNameToMetaVictims), dumpVictims(tc.want))
			}
		})
	}
}

func podWithUID(uid string) *corev1.Pod {
	p := plainPod()
	p.UID = types.UID(uid)
	return p
}

func dumpVictims(m map[string]*extenderv1.MetaVictims) string {
	out := "{"
	for node, v := range m {
		out += node + ":["
		for _, p := range v.Pods {
			out += p.UID + " "
		}
		out += "] "
	}
	return out + "}"
}
