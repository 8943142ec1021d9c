package placement_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"everynode.io/everynode/placement"
)

func exists(key string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
}

// The upstream list (AddOrUpdateDaemonPodTolerations), in upstream's order.
var upstreamDaemonTolerations = []corev1.Toleration{
	exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
	exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
	exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
	exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
	exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
	exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
}

func TestTolerationsDaemonTolerations(t *testing.T) {
	tests := map[string]struct {
		hostNetwork bool
		want        []corev1.Toleration
	}{
		"pod network": {want: upstreamDaemonTolerations},
		"host network adds network-unavailable": {
			hostNetwork: true,
			want:        append(append([]corev1.Toleration{}, upstreamDaemonTolerations...), exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := placement.DaemonTolerations(tc.hostNetwork)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("DaemonTolerations(%v) =\n%+v\nwant\n%+v", tc.hostNetwork, got, tc.want)
			}
			// A caller may change its copy without changing the next one's.
			got[0].Key = "changed"
			if again := placement.DaemonTolerations(tc.hostNetwork); again[0].Key != corev1.TaintNodeNotReady {
				t.Fatalf("DaemonTolerations shares its backing array: got %q", again[0].Key)
			}
		})
	}
}

func TestTolerationsWithDaemonTolerations(t *testing.T) {
	user := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	tolerateAll := corev1.Toleration{Operator: corev1.TolerationOpExists}
	withSeconds := exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	withSeconds.TolerationSeconds = ptr.To[int64](300)
	notReadyNoSchedule := exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)
	networkUnavailable := exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)

	defaults := func(extra ...corev1.Toleration) []corev1.Toleration {
		return append(append([]corev1.Toleration{}, upstreamDaemonTolerations...), extra...)
	}
	tests := map[string]struct {
		in          []corev1.Toleration
		hostNetwork bool
		want        []corev1.Toleration
	}{
		"none": {
			want: defaults(),
		},
		"none, host network": {
			hostNetwork: true,
			want:        defaults(networkUnavailable),
		},
		"a user toleration stays first": {
			in:   []corev1.Toleration{user},
			want: append([]corev1.Toleration{user}, defaults()...),
		},
		"a default with tolerationSeconds is replaced in place, so the daemon is never evicted": {
			in: []corev1.Toleration{user, withSeconds},
			want: append([]corev1.Toleration{user, exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)},
				upstreamDaemonTolerations[1:]...),
		},
		"duplicates of a default collapse to one": {
			in: []corev1.Toleration{
				exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
				user,
				exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
			},
			want: append([]corev1.Toleration{exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule), user},
				upstreamDaemonTolerations[:5]...),
		},
		"same key, other effect is a different toleration": {
			in:   []corev1.Toleration{notReadyNoSchedule},
			want: append([]corev1.Toleration{notReadyNoSchedule}, defaults()...),
		},
		"tolerate-everything is kept and the defaults still added": {
			in:   []corev1.Toleration{tolerateAll},
			want: append([]corev1.Toleration{tolerateAll}, defaults()...),
		},
		"a pod-network pod keeps its own network-unavailable toleration": {
			in:   []corev1.Toleration{networkUnavailable},
			want: append([]corev1.Toleration{networkUnavailable}, defaults()...),
		},
		"a host-network pod's network-unavailable toleration is not doubled": {
			in:          []corev1.Toleration{networkUnavailable},
			hostNetwork: true,
			want:        append([]corev1.Toleration{networkUnavailable}, defaults()...),
		},
		"already complete input is unchanged": {
			in:   defaults(),
			want: defaults(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := append([]corev1.Toleration(nil), tc.in...)
			got := placement.WithDaemonTolerations(in, tc.hostNetwork)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("WithDaemonTolerations() =\n%+v\nwant\n%+v", got, tc.want)
			}
			if !equality.Semantic.DeepEqual(in, tc.in) {
				t.Fatalf("WithDaemonTolerations modified its input:\n%+v\nwas\n%+v", in, tc.in)
			}
			if again := placement.WithDaemonTolerations(got, tc.hostNetwork); !equality.Semantic.DeepEqual(again, got) {
				t.Fatalf("not idempotent: second application gave\n%+v\nfirst\n%+v", again, got)
			}
		})
	}
}
