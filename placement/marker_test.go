package placement_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// withMarker turns the daemon-pod marker on for one test.
func withMarker(t *testing.T, name string) {
	t.Helper()
	placement.SetDaemonResource(name)
	t.Cleanup(func() { placement.SetDaemonResource("") })
}

func TestValidateDaemonResource(t *testing.T) {
	cases := map[string]string{ // name: part of the error, "" if valid
		"":                            "",
		"everynode.io/daemon":         "",
		"example.com/daemon-pod":      "",
		"daemon":                      "needs a domain",
		"kubernetes.io/daemon":        "kubernetes.io",
		"node.kubernetes.io/daemon":   "kubernetes.io",
		"notkubernetes.io/daemon":     "kubernetes.io",
		"requests.example.com/daemon": "for quotas",
		"everynode.io/":               "not a resource name",
		"every node.io/daemon":        "not a resource name",
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			err := placement.ValidateDaemonResource(name)
			switch {
			case want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want one containing %q", err, want)
			}
		})
	}
}

// TestStampMarker: the stamp gives the first container one of the marker
// resource, in requests and limits (the API server wants them equal), and
// keeps the template's own resources; twice is once; off is nothing.
func TestStampMarker(t *testing.T) {
	ds := stampSet("agent")
	ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "s:1"})
	ds.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	off := placement.NewPod(ds, "n1", "h1")
	if !reflect.DeepEqual(off.Spec.Containers, ds.Spec.Template.Spec.Containers) {
		t.Errorf("marker off: containers %+v, want the template's", off.Spec.Containers)
	}

	withMarker(t, everynodev1alpha1.DefaultDaemonResource)
	pod := placement.NewPod(ds, "n1", "h1")
	name := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	c := pod.Spec.Containers[0].Resources
	if q := c.Requests[name]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("request %s = %s, want 1", name, q.String())
	}
	if q := c.Limits[name]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("limit %s = %s, want 1", name, q.String())
	}
	if q := c.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("the template's cpu request became %s", q.String())
	}
	if len(pod.Spec.Containers[1].Resources.Requests)+len(pod.Spec.Containers[1].Resources.Limits) != 0 {
		t.Errorf("the second container got %+v; one marker per pod is enough", pod.Spec.Containers[1].Resources)
	}
	if _, ok := ds.Spec.Template.Spec.Containers[0].Resources.Limits[name]; ok {
		t.Error("the stamp changed the set's template")
	}
	again := pod.DeepCopy()
	placement.Stamp(again, "n1")
	if !reflect.DeepEqual(again, pod) {
		t.Errorf("a second Stamp changed the pod:\ngot  %+v\nwant %+v", again.Spec.Containers, pod.Spec.Containers)
	}
}

// TestMarkerIsNoTemplateChange: the marker is the stamp's, not the
// template's, so nothing that compares a pod with its revision sees it. A
// pod made with the marker and one made without it take the same in-place
// patch to a new image, and one with the marker needs no patch at all to
// its own revision (a patch there would mean "old"). Node overrides that
// set resources cannot take it away.
func TestMarkerIsNoTemplateChange(t *testing.T) {
	ds := stampSet("agent")
	unmarked := placement.NewPod(ds, "n1", "h1")
	withMarker(t, everynodev1alpha1.DefaultDaemonResource)
	marked := placement.NewPod(ds, "n1", "h1")

	now := time.Unix(1700000000, 0)
	if _, _, ok := placement.InPlacePatch(marked, placement.NewPod(ds, "n1", "h1"), "h1", now); ok {
		t.Error("InPlacePatch finds a change between a marked pod and its own revision")
	}
	if _, _, ok := placement.InPlacePatch(marked, unmarked, "h1", now); ok {
		t.Error("InPlacePatch finds a change between a marked pod and the unmarked pod of the same revision")
	}
	next := ds.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "agent:2"
	target := placement.NewPod(next, "n1", "h2")
	p1, _, ok1 := placement.InPlacePatch(marked, target, "h2", now)
	p2, _, ok2 := placement.InPlacePatch(unmarked, target, "h2", now)
	if !ok1 || !ok2 || string(p1) != string(p2) {
		t.Errorf("in-place patches differ:\nmarked   %s (%v)\nunmarked %s (%v)", p1, ok1, p2, ok2)
	}
	var patch map[string]any
	if err := json.Unmarshal(p1, &patch); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p1), "resources") {
		t.Errorf("the in-place patch touches resources: %s", p1)
	}

	big := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "big"}}}
	withOverride := ds.DeepCopy()
	withOverride.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
		Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","resources":{"requests":{"memory":"1Gi"},"limits":null}}]}}`)},
	}}
	pod, err := placement.NewPodFor(withOverride, big, "n1", "h1", "")
	if err != nil {
		t.Fatal(err)
	}
	res := pod.Spec.Containers[0].Resources
	name := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	if _, ok := res.Limits[name]; !ok {
		t.Errorf("an override's resources dropped the marker: %+v", res)
	}
	if q := res.Requests[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("the override's memory request became %s", q.String())
	}
}

// TestUnschedulableForDaemonResource is the detection of a scheduler that
// does not ignore the marker, from the pod's PodScheduled condition.
func TestUnschedulableForDaemonResource(t *testing.T) {
	const res = "everynode.io/daemon"
	pending := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg},
		}}}
	}
	upstream := "0/3 nodes are available: 1 Insufficient everynode.io/daemon, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
	cases := map[string]struct {
		pod      *corev1.Pod
		resource string
		want     bool
	}{
		"kube-scheduler's message":       {pod: pending(corev1.PodReasonUnschedulable, upstream), resource: res, want: true},
		"at the end":                     {pod: pending(corev1.PodReasonUnschedulable, "0/1 nodes are available: 1 Insufficient everynode.io/daemon"), resource: res, want: true},
		"another resource":               {pod: pending(corev1.PodReasonUnschedulable, "0/3 nodes are available: 3 Insufficient cpu."), resource: res},
		"a longer name":                  {pod: pending(corev1.PodReasonUnschedulable, "0/3 nodes are available: 3 Insufficient everynode.io/daemon-x."), resource: res},
		"a longer name, then the marker": {pod: pending(corev1.PodReasonUnschedulable, "1 Insufficient everynode.io/daemonx, 2 Insufficient everynode.io/daemon."), resource: res, want: true},
		"marker off":                     {pod: pending(corev1.PodReasonUnschedulable, upstream)},
		"not unschedulable":              {pod: pending("SchedulerError", upstream), resource: res},
		"scheduled":                      {pod: &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}, resource: res},
		"no condition yet":               {pod: &corev1.Pod{}, resource: res},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := placement.UnschedulableForDaemonResource(tc.pod, tc.resource); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadinessGateMode(t *testing.T) {
	t.Cleanup(func() { placement.SetStartupTaint(""); placement.SetDaemonResource("") })
	cases := []struct {
		taint, marker string
		want          placement.GateMode
	}{
		{"", "", placement.GateExtender},
		{"", "everynode.io/daemon", placement.GateInactive},
		{"example.com/agents-not-ready", "", placement.GateStartupTaint},
		{"example.com/agents-not-ready", "everynode.io/daemon", placement.GateStartupTaint},
	}
	for _, tc := range cases {
		placement.SetStartupTaint(tc.taint)
		placement.SetDaemonResource(tc.marker)
		if got := placement.ReadinessGateMode(); got != tc.want {
			t.Errorf("taint %q marker %q: mode %s, want %s", tc.taint, tc.marker, got, tc.want)
		}
	}
	placement.SetStartupTaint("")
	placement.SetDaemonResource("everynode.io/daemon")
	if msg := placement.GateInactiveMessage(); !strings.Contains(msg, "everynode.io/daemon") || !strings.Contains(msg, "--startup-taint") {
		t.Errorf("message %q names neither the marker nor the fix", msg)
	}
}

// TestTurnOffDaemonResource: the fallback turns a configured marker off
// once, for the stamp and the gate mode, keeps the configured name, and a
// new SetDaemonResource (a new process) starts with it on again.
func TestTurnOffDaemonResource(t *testing.T) {
	ds := stampSet("agent")
	name := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	t.Cleanup(func() { placement.SetDaemonResource("") })

	placement.SetDaemonResource("")
	if placement.TurnOffDaemonResource() || placement.DaemonResourceFallback() {
		t.Error("a marker configured off was turned off, or counts as a fallback")
	}

	placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
	if !placement.TurnOffDaemonResource() {
		t.Fatal("the first TurnOffDaemonResource reports it did nothing")
	}
	if placement.TurnOffDaemonResource() {
		t.Error("a second TurnOffDaemonResource reports it turned the marker off again")
	}
	if got := placement.DaemonResource(); got != "" {
		t.Errorf("DaemonResource %q after the fallback, want \"\"", got)
	}
	if got := placement.ConfiguredDaemonResource(); got != everynodev1alpha1.DefaultDaemonResource {
		t.Errorf("ConfiguredDaemonResource %q after the fallback", got)
	}
	if !placement.DaemonResourceFallback() {
		t.Error("DaemonResourceFallback false after the fallback")
	}
	if _, ok := placement.NewPod(ds, "n1", "h1").Spec.Containers[0].Resources.Requests[name]; ok {
		t.Error("a pod made after the fallback requests the marker")
	}
	if got := placement.ReadinessGateMode(); got != placement.GateExtender {
		t.Errorf("gate mode %s after the fallback, want %s: the extender sees every pod again", got, placement.GateExtender)
	}

	placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
	if placement.DaemonResourceFallback() || placement.DaemonResource() == "" {
		t.Error("SetDaemonResource did not turn the marker on again")
	}
	if _, ok := placement.NewPod(ds, "n1", "h1").Spec.Containers[0].Resources.Requests[name]; !ok {
		t.Error("a pod made with the marker on again lacks it")
	}
}

// TestTurnOffDaemonResourceRace: many workers may see stuck pods at once;
// exactly one turns the marker off and says so (run with -race).
func TestTurnOffDaemonResourceRace(t *testing.T) {
	placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
	t.Cleanup(func() { placement.SetDaemonResource("") })
	var wg sync.WaitGroup
	var turned atomic.Int32
	for range 8 {
		wg.Go(func() {
			placement.WithDaemonResource(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}})
			if placement.TurnOffDaemonResource() {
				turned.Add(1)
			}
		})
	}
	wg.Wait()
	if n := turned.Load(); n != 1 {
		t.Errorf("%d callers turned the marker off, want 1", n)
	}
}

// TestStuckForDaemonResource: only a pending, unbound pod that requests
// the marker and that the scheduler left unschedulable for it is stuck.
func TestStuckForDaemonResource(t *testing.T) {
	const res = everynodev1alpha1.DefaultDaemonResource
	msg := "0/3 nodes are available: 3 Insufficient everynode.io/daemon. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	stuck := func(change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{res: resource.MustParse("1")},
				Limits:   corev1.ResourceList{res: resource.MustParse("1")},
			}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg},
			}},
		}
		if change != nil {
			change(p)
		}
		return p
	}
	cases := map[string]struct {
		pod      *corev1.Pod
		resource string
		want     bool
	}{
		"stuck":          {pod: stuck(nil), resource: res, want: true},
		"limit only":     {pod: stuck(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = nil }), resource: res, want: true},
		"marker unknown": {pod: stuck(nil)},
		"other marker":   {pod: stuck(nil), resource: "example.com/daemon"},
		"no marker": {pod: stuck(func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }),
			resource: res},
		"bound":    {pod: stuck(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), resource: res},
		"running":  {pod: stuck(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), resource: res},
		"deleting": {pod: stuck(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), resource: res},
		"unschedulable for cpu": {pod: stuck(func(p *corev1.Pod) { p.Status.Conditions[0].Message = "0/3 nodes are available: 3 Insufficient cpu." }),
			resource: res},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := placement.StuckForDaemonResource(tc.pod, tc.resource); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
