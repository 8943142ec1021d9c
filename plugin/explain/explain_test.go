package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/placement"
)

const ns = "logging"

func testSet() *everynodev1alpha1.DaemonSet {
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fluentd", Namespace: ns, UID: "set-uid"},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fluentd"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fluentd"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"logging": "on"},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"edge"}},
						}}},
					}}},
					Containers: []corev1.Container{{Name: "fluentd", Image: "fluentd:v1"}},
				},
			},
		},
		Status: everynodev1alpha1.DaemonSetStatus{UpdateRevision: "h2"},
	}
	return ds
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	l := map[string]string{"logging": "on"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints}}
}

func pod(ds *everynodev1alpha1.DaemonSet, name, nodeName, hash string, phase corev1.PodPhase, ready bool, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p := placement.NewPod(ds, nodeName, hash)
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.Status.Phase = phase
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	p.Status.ContainerStatuses = statuses
	return p
}

// cluster is one of each case: a ready node, a taint, a missing label, an
// affinity term, a pod the scheduler cannot place, a crash-looping pod on
// an old revision.
func cluster() (*everynodev1alpha1.DaemonSet, []runtime.Object) {
	ds := testSet()
	unlabeled := node("unlabeled", nil)
	delete(unlabeled.Labels, "logging")
	crashing := pod(ds, "fluentd-c", "crashing", "h1", corev1.PodRunning, false, corev1.ContainerStatus{
		Name: "fluentd", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
	})
	t0 := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	event := func(name, msg string, at metav1.Time) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "fluentd-p", Namespace: ns},
			Reason:         "FailedScheduling", Message: msg, LastTimestamp: at,
		}
	}
	objs := []runtime.Object{
		node("ready-1", nil),
		node("tainted", nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
		unlabeled,
		node("edge-1", map[string]string{"zone": "edge"}),
		node("pending", nil),
		node("crashing", nil),
		pod(ds, "fluentd-r", "ready-1", "h2", corev1.PodRunning, true),
		pod(ds, "fluentd-p", "pending", "h2", corev1.PodPending, false),
		crashing,
		event("e1", "0/6 nodes are available: 1 Too many pods.", t0),
		event("e2", "0/6 nodes are available: 1 Insufficient cpu.", metav1.NewTime(t0.Add(time.Minute))),
	}
	return ds, objs
}

type fakeFactory struct {
	en   versioned.Interface
	core corev1client.CoreV1Interface
}

func (f fakeFactory) Namespace() (string, error)                        { return ns, nil }
func (f fakeFactory) EverynodeClient() (versioned.Interface, error)     { return f.en, nil }
func (f fakeFactory) CoreClient() (corev1client.CoreV1Interface, error) { return f.core, nil }
func (f fakeFactory) AppsClient() (appsv1client.AppsV1Interface, error) {
	return kubefake.NewSimpleClientset().AppsV1(), nil
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ds, objs := cluster()
	f := fakeFactory{en: everynodefake.NewSimpleClientset(ds), core: kubefake.NewSimpleClientset(objs...).CoreV1()}
	var out bytes.Buffer
	cmd := NewCommand(f, genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestExplainGolden(t *testing.T) {
	got, err := run(t, "fluentd")
	if err != nil {
		t.Fatal(err)
	}
	want := `DaemonSet logging/fluentd on 6 nodes: 1 runs a ready pod, 5 do not:
  1 node: nodeSelector logging=on: the node has no label logging
  1 node: pod Pending: the scheduler cannot place it
  1 node: pod Running, not ready: CrashLoopBackOff
  1 node: required node affinity term 0: zone NotIn [edge]
  1 node: taint dedicated=gpu:NoSchedule not tolerated

crashing   should run
             pod fluentd-c: Running, not ready, old revision
             fluentd: waiting, CrashLoopBackOff, 4 restarts
             old revision: not replaced yet (rolling update in progress)
edge-1     should not run: required node affinity term 0: zone NotIn [edge]
pending    should run
             pod fluentd-p: Pending, not ready, updated
             scheduler: 0/6 nodes are available: 1 Insufficient cpu.
tainted    gets no new pod (a running one may stay): taint dedicated=gpu:NoSchedule not tolerated
unlabeled  should not run: nodeSelector logging=on: the node has no label logging
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

func TestExplainOneNodeWideAndJSON(t *testing.T) {
	got, err := run(t, "daemonset/fluentd", "--node", "ready-1", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := `DaemonSet logging/fluentd on 1 node: 1 runs a ready pod.

ready-1  should run
           pod fluentd-r: Running, ready, updated
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	got, err = run(t, "fluentd", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, got)
	}
	if r.Nodes != 6 || r.Ready != 1 || len(r.Reasons) != 5 || len(r.Details) != 6 {
		t.Errorf("report %+v", r)
	}
}

func TestExplainErrors(t *testing.T) {
	for args, want := range map[string]string{
		"nope":                 `daemonsets.everynode.io "nope" not found in namespace "logging"`,
		"fluentd --node ghost": `node "ghost" not found`,
		"fluentd -o yaml":      `unknown output format "yaml"`,
		"deployment/fluentd":   `"deployment/fluentd" is not an everynode DaemonSet`,
	} {
		_, err := run(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("explain %s: error %v, want one containing %q", args, err, want)
		}
	}
}

// A node the rolling update skips says so, and why its pod stays old.
func TestExplainSkippedNode(t *testing.T) {
	ds := testSet()
	leaving := node("leaving", nil, corev1.Taint{Key: placement.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
	serving := node("serving", nil)
	pods := []corev1.Pod{
		*pod(ds, "fluentd-l", "leaving", "h1", corev1.PodRunning, true),
		*pod(ds, "fluentd-s", "serving", "h1", corev1.PodRunning, true),
	}
	r := build(ds, []corev1.Node{*leaving, *serving}, pods, nil, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	l, s := r.Details[0], r.Details[1]
	if l.Lifecycle != "Leaving" || l.LifecycleWhy != "taint karpenter.sh/disrupted" || !strings.Contains(l.Update, "keeps its old pod to the end") {
		t.Errorf("leaving node: lifecycle %q (%q), update %q", l.Lifecycle, l.LifecycleWhy, l.Update)
	}
	if s.Lifecycle != "" || !strings.Contains(s.Update, "not replaced yet") {
		t.Errorf("serving node: lifecycle %q, update %q", s.Lifecycle, s.Update)
	}
}

// Each node's size under spec.nodeSizing, and how its pod stands.
func TestExplainNodeSizing(t *testing.T) {
	ds := testSet()
	ds.Spec.NodeSizing = []everynodev1alpha1.ContainerSizing{{Name: "fluentd", Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: everynodev1alpha1.ResourceShare{Fraction: "0.05", Min: ptr.To(resource.MustParse("1"))}},
	}}}
	sized := func(name, cpu string) *corev1.Node {
		n := node(name, nil)
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		return n
	}
	withCPU := func(p *corev1.Pod, cpu string) *corev1.Pod {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	nodes := []corev1.Node{*sized("a-sized", "64"), *sized("b-waiting", "64"), *sized("c-small", "0.5")}
	pods := []corev1.Pod{
		*withCPU(pod(ds, "f-a", "a-sized", "h2", corev1.PodRunning, true), "3200m"),
		*withCPU(pod(ds, "f-b", "b-waiting", "h2", corev1.PodRunning, true), "1"),
		*withCPU(pod(ds, "f-c", "c-small", "h2", corev1.PodRunning, true), "100m"),
	}
	r := build(ds, nodes, pods, nil, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	want := []struct{ size, state string }{
		{"fluentd: requests cpu=3200m", "sized"},
		{"fluentd: requests cpu=3200m", "waiting to be resized in place (at most maxUnavailable pods resize at once)"},
		{"fluentd: requests cpu=1", "does not fit: fluentd: cpu 1 > allocatable 500m; the pod keeps its size"},
	}
	for i, w := range want {
		if d := r.Details[i]; d.Size != w.size || d.SizeState != w.state {
			t.Errorf("%s: size %q (%q), want %q (%q)", d.Node, d.Size, d.SizeState, w.size, w.state)
		}
	}
}
