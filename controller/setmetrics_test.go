package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

// The collector reads the lister at each scrape: values follow the status,
// and a deleted set leaves no series behind.
func TestSetStatusCollector(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c := NewSetStatusCollector(everynodelisters.NewDaemonSetLister(indexer))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "agent", Generation: 3},
		Status: everynodev1alpha1.DaemonSetStatus{
			DesiredNumberScheduled: 5, CurrentNumberScheduled: 4, UpdatedNumberScheduled: 2,
			NumberReady: 3, NumberAvailable: 3, NumberUnavailable: 2, NumberMisscheduled: 1,
			ObservedGeneration: 2,
			Conditions: []metav1.Condition{
				{Type: everynodev1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: everynodev1alpha1.ReasonPodsCrashLooping},
				{Type: everynodev1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: everynodev1alpha1.ReasonPodsCrashLooping},
			},
		},
	}
	other := &everynodev1alpha1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cni", Generation: 1}}
	for _, o := range []any{ds, other} {
		if err := indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}

	want := `
# HELP everynode_daemonset_status_desired_number_scheduled Nodes that should run the set's daemon pod (status.desiredNumberScheduled).
# TYPE everynode_daemonset_status_desired_number_scheduled gauge
everynode_daemonset_status_desired_number_scheduled{name="agent",namespace="ops"} 5
everynode_daemonset_status_desired_number_scheduled{name="cni",namespace="kube-system"} 0
# HELP everynode_daemonset_status_updated_number_scheduled Nodes that run the daemon pod of the newest revision (status.updatedNumberScheduled).
# TYPE everynode_daemonset_status_updated_number_scheduled gauge
everynode_daemonset_status_updated_number_scheduled{name="agent",namespace="ops"} 2
everynode_daemonset_status_updated_number_scheduled{name="cni",namespace="kube-system"} 0
# HELP everynode_daemonset_status_number_misscheduled Nodes that run the daemon pod but should not (status.numberMisscheduled).
# TYPE everynode_daemonset_status_number_misscheduled gauge
everynode_daemonset_status_number_misscheduled{name="agent",namespace="ops"} 1
everynode_daemonset_status_number_misscheduled{name="cni",namespace="kube-system"} 0
# HELP everynode_daemonset_status_condition 1 for each condition of the set's status (Progressing, Available), with its status and reason.
# TYPE everynode_daemonset_status_condition gauge
everynode_daemonset_status_condition{name="agent",namespace="ops",reason="PodsCrashLooping",status="False",type="Available"} 1
everynode_daemonset_status_condition{name="agent",namespace="ops",reason="PodsCrashLooping",status="False",type="Progressing"} 1
# HELP everynode_daemonset_metadata_generation The set's metadata.generation; above observed_generation, the status is not yet for the current spec.
# TYPE everynode_daemonset_metadata_generation gauge
everynode_daemonset_metadata_generation{name="agent",namespace="ops"} 3
everynode_daemonset_metadata_generation{name="cni",namespace="kube-system"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"everynode_daemonset_status_desired_number_scheduled",
		"everynode_daemonset_status_updated_number_scheduled",
		"everynode_daemonset_status_number_misscheduled",
		"everynode_daemonset_status_condition",
		"everynode_daemonset_metadata_generation",
	); err != nil {
		t.Error(err)
	}
	// Every name the collector is said to export is exported, and no other.
	if n, err := testutil.GatherAndCount(reg, SetMetricNames...); err != nil || n != 2*(len(SetMetricNames)-1)+2 {
		t.Errorf("gathered %d series of SetMetricNames (err %v), want %d", n, err, 2*(len(SetMetricNames)-1)+2)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 2*(len(SetMetricNames)-1)+2 {
		t.Errorf("gathered %d series in all (err %v), want only SetMetricNames'", n, err)
	}

	// The deleted set's series are gone at the next scrape.
	if err := indexer.Delete(ds); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(SetMetricNames) - 1; n != want {
		t.Errorf("after the delete: %d series, want %d (the remaining set's, no condition)", n, want)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP everynode_daemonset_status_number_ready Nodes that should run the daemon pod and have one Ready (status.numberReady).
# TYPE everynode_daemonset_status_number_ready gauge
everynode_daemonset_status_number_ready{name="cni",namespace="kube-system"} 0
`), "everynode_daemonset_status_number_ready"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
