package rollout

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// historyFixture is a set at revision 3 of three, listed out of order,
// next to revisions that are not its own.
func historyFixture(t *testing.T) *fixture {
	ds := newSet("fluentd", "img:v3")
	foreign := newRevision(t, ds, 7, "img:x", "other owner")
	foreign.Name += "-foreign"
	foreign.OwnerReferences[0].UID = types.UID("re-created-set")
	builtin := newRevision(t, ds, 8, "img:y", "apps/v1 DaemonSet of the same name")
	builtin.Name += "-builtin"
	builtin.OwnerReferences[0].APIVersion = "apps/v1"
	other := newSet("other", "img:v1")
	return newFixture(ds, other,
		newRevision(t, ds, 3, "img:v3", "image v3"),
		newRevision(t, ds, 1, "img:v1", ""),
		newRevision(t, ds, 2, "img:v2", "image v2"),
		foreign, builtin,
		newRevision(t, other, 1, "img:v1", "other set"),
	)
}

func TestHistory(t *testing.T) {
	tests := map[string]struct {
		fixture func(*testing.T) *fixture
		args    []string
		want    string   // whole stdout
		wantHas []string // parts of stdout
		wantErr error
	}{
		"table sorted by revision, own revisions only": {
			fixture: historyFixture,
			args:    []string{"fluentd"},
			want: "daemonset.everynode.io/fluentd \n" +
				"REVISION  CHANGE-CAUSE\n" +
				"1         <none>\n" +
				"2         image v2\n" +
				"3         image v3\n\n",
		},
		"TYPE/NAME": {
			fixture: historyFixture,
			args:    []string{"eds/other"},
			want:    "daemonset.everynode.io/other \nREVISION  CHANGE-CAUSE\n1         other set\n\n",
		},
		"one revision's template": {
			fixture: historyFixture,
			args:    []string{"fluentd", "--revision=2"},
			wantHas: []string{"daemonset.everynode.io/fluentd with revision #2\nPod Template:\n", "Image:", "img:v2"},
		},
		"one revision as an object": {
			fixture: historyFixture,
			args:    []string{"fluentd", "--revision=1", "-o", "yaml"},
			wantHas: []string{"apiVersion: everynode.io/v1alpha1", "kind: DaemonSet", "image: img:v1"},
		},
		"every revision as an object": {
			fixture: historyFixture,
			args:    []string{"fluentd", "-o", "jsonpath={.spec.template.spec.containers[0].image} "},
			want:    "img:v1 img:v2 img:v3 ",
		},
		"no history": {
			fixture: func(*testing.T) *fixture { return newFixture(newSet("fluentd", "img:v1")) },
			args:    []string{"fluentd"},
			want:    "daemonset.everynode.io/fluentd \nNo rollout history found.\n",
		},
		"unknown revision": {
			fixture: historyFixture,
			args:    []string{"fluentd", "--revision=5"},
			wantErr: errUnknownRevision,
		},
		"unknown revision with -o": {
			fixture: historyFixture,
			args:    []string{"fluentd", "--revision=5", "-o", "name"},
			wantErr: errUnknownRevision,
		},
		"a revision of a set with no history": {
			fixture: func(*testing.T) *fixture { return newFixture(newSet("fluentd", "img:v1")) },
			args:    []string{"fluentd", "--revision=1"},
			wantErr: errNoHistory,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, _, err := tc.fixture(t).run(t, append([]string{"history"}, tc.args...)...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && out != tc.want {
				t.Errorf("printed\n%q\nwant\n%q", out, tc.want)
			}
			mustContain(t, out, tc.wantHas...)
		})
	}
}

func TestHistoryErrorMessages(t *testing.T) {
	f := historyFixture(t)
	_, _, err := f.run(t, "history", "fluentd", "--revision=5")
	if want := `unknown revision 5: daemon set "fluentd" has revisions 1, 2, 3`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, _, err = f.run(t, "history", "missing")
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing set: err = %v, want NotFound", err)
	}
	_, _, err = f.run(t, "history", "fluentd", "--revision=-1")
	if err == nil || !strings.Contains(err.Error(), "revision must be a positive integer") {
		t.Errorf("negative revision: err = %v", err)
	}
	_, _, err = f.run(t, "history", "deployment/fluentd")
	if err == nil || !strings.Contains(err.Error(), `resource type "deployment" is not supported`) {
		t.Errorf("other kind: err = %v", err)
	}
}

func TestHistoryBySelectorInAllNamespaces(t *testing.T) {
	a := newSet("agent", "img:v1", func(ds *everynodev1alpha1.DaemonSet) { ds.Labels = map[string]string{"tier": "node"} })
	b := a.DeepCopy()
	b.Namespace, b.UID = "ns0", "agent-ns0-uid"
	revB := newRevision(t, b, 4, "img:v4", "in ns0")
	f := newFixture(a, b, newSet("unlabelled", "img:v1"), newRevision(t, a, 1, "img:v1", "in ns1"), revB)
	out, _, err := f.run(t, "history", "-l", "tier=node", "-A")
	if err != nil {
		t.Fatal(err)
	}
	want := "daemonset.everynode.io/agent \nREVISION  CHANGE-CAUSE\n4         in ns0\n\n" +
		"daemonset.everynode.io/agent \nREVISION  CHANGE-CAUSE\n1         in ns1\n\n"
	if out != want {
		t.Errorf("printed\n%q\nwant\n%q", out, want)
	}
}

func TestPickRevision(t *testing.T) {
	ds := newSet("fluentd", "img:v3")
	revs := func(numbers ...int64) []*appsv1.ControllerRevision {
		var out []*appsv1.ControllerRevision
		for _, n := range numbers {
			out = append(out, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Revision: n})
		}
		return out
	}
	tests := map[string]struct {
		revs    []*appsv1.ControllerRevision
		to      int64
		want    int64
		wantErr error
	}{
		"previous is the second highest": {revs: revs(1, 4, 7), want: 4},
		"a given one":                    {revs: revs(1, 4, 7), to: 1, want: 1},
		"the current one":                {revs: revs(1, 4, 7), to: 7, want: 7},
		"unknown":                        {revs: revs(1, 4, 7), to: 2, wantErr: errUnknownRevision},
		"only one: no previous":          {revs: revs(3), wantErr: errNoPreviousRevision},
		"only one, asked for":            {revs: revs(3), to: 3, want: 3},
		"none":                           {wantErr: errNoHistory},
		"none, asked for one":            {to: 1, wantErr: errNoHistory},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := pickRevision(ds, tc.revs, tc.to)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Revision != tc.want {
				t.Fatalf("pickRevision = %v, %v; want revision %d", got, err, tc.want)
			}
		})
	}
}

func TestAtRevisionBadData(t *testing.T) {
	ds := newSet("fluentd", "img:v1")
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "fluentd-x"}, Revision: 2, Data: runtime.RawExtension{Raw: []byte("{not json")}}
	if _, err := atRevision(ds, rev); err == nil || !strings.Contains(err.Error(), "revision 2 (fluentd-x)") {
		t.Errorf("err = %v", err)
	}
	if ds.Spec.Template.Spec.Containers[0].Image != "img:v1" {
		t.Error("atRevision changed its input")
	}
}

func TestDescribeRevision(t *testing.T) {
	grace := int64(300)
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "agent",
			Containers: []corev1.Container{{
				Name: "agent", Image: "img:v1", Command: []string{"/agent"}, Args: []string{"--v=2"},
				Ports:        []corev1.ContainerPort{{ContainerPort: 9100, Protocol: corev1.ProtocolTCP, Name: "metrics"}},
				Env:          []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log", ReadOnly: true}},
			}},
			Volumes:     []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}, {Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &grace}},
		},
	}
	overrides := []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
		Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","image":"img:big"}]}}`)},
	}}
	got := describeRevision(tmpl, overrides)
	mustContain(t, got,
		"Pod Template:\n",
		"  Labels:",
		"a=1\n", "b=2\n",
		"  Service Account:",
		"  Containers:\n   agent:\n",
		"img:v1", "9100/TCP (metrics)", "/agent", "--v=2",
		"NODE:", "(v1:spec.nodeName)",
		"/var/log from logs (ro)",
		"HostPath /var/log",
		"op=Exists",
		"node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
		"Node Overrides:\n  Node Selector:",
		"pool=big",
		`{"spec":{"containers":[{"name":"agent","image":"img:big"}]}}`,
	)
	if strings.Index(got, "a=1") > strings.Index(got, "b=2") {
		t.Errorf("labels not sorted:\n%s", got)
	}
}
