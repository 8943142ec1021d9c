package placement

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func inPlaceTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "setup:1"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "log", Image: "log:1"}},
		},
	}
}

func TestImagesOnlyChange(t *testing.T) {
	tests := map[string]struct {
		change func(*corev1.PodTemplateSpec)
		want   bool
	}{
		"nothing":             {change: func(*corev1.PodTemplateSpec) {}},
		"one container image": {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[1].Image = "log:2" }, want: true},
		"every image": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image, p.Spec.Containers[1].Image, p.Spec.InitContainers[0].Image = "a", "b", "c"
		}, want: true},
		"init container image": {change: func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers[0].Image = "setup:2" }, want: true},
		"image and env": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A"}}
		}},
		"image and a label":       {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "app:2"; p.Labels["tier"] = "x" }},
		"image and an annotation": {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "app:2"; p.Annotations["note"] = "y" }},
		"image and resources": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}},
		"container renamed": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Name = "main"
		}},
		"container added": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "x", Image: "x"})
		}},
		"containers swapped":            {change: func(p *corev1.PodTemplateSpec) { c := p.Spec.Containers; c[0], c[1] = c[1], c[0] }},
		"restartedAt (rollout restart)": {change: func(p *corev1.PodTemplateSpec) { p.Annotations[everynodev1alpha1.AnnotationRestartedAt] = "now" }},
		"hostNetwork":                   {change: func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			from, to := inPlaceTemplate(), inPlaceTemplate()
			tc.change(to)
			if got := ImagesOnlyChange(from, to); got != tc.want {
				t.Errorf("ImagesOnlyChange = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(from, inPlaceTemplate()) {
				t.Error("from was modified")
			}
		})
	}
}

func TestInPlaceUpdateRoundTrip(t *testing.T) {
	at := time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)
	tests := map[string]struct {
		u    InPlaceUpdate
		want InPlaceUpdate // zero: u itself
	}{
		"two containers, one with no status": {u: InPlaceUpdate{
			Revision: "5f7c9d", Time: at, Restarts: 3,
			Containers: []InPlaceContainer{
				{Name: "app", ImageID: "docker.io/library/app@sha256:abc", ContainerID: "containerd://123"},
				{Name: "log"},
			},
		}},
		"no container waited for (init container images only)": {u: InPlaceUpdate{Revision: "h", Time: at}},
		"zero time":                 {u: InPlaceUpdate{Revision: "h", Time: time.Time{}.UTC(), Containers: []InPlaceContainer{{Name: "a"}}}},
		"characters JSON escapes":   {u: InPlaceUpdate{Revision: "h", Time: at, Containers: []InPlaceContainer{{Name: "a", ImageID: `x" <&> \ é`}}}},
		"time in another time zone": {u: InPlaceUpdate{Revision: "h", Time: at.In(time.FixedZone("X", 3600))}, want: InPlaceUpdate{Revision: "h", Time: at}},
		"time to the second":        {u: InPlaceUpdate{Revision: "h", Time: at.Add(999 * time.Millisecond)}, want: InPlaceUpdate{Revision: "h", Time: at}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := tc.want
			if want.Revision == "" {
				want = tc.u
			}
			s := tc.u.String()
			if !json.Valid([]byte(s)) {
				t.Fatalf("String() = %q, not JSON", s)
			}
			got, ok := ParseInPlaceUpdate(s)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("ParseInPlaceUpdate(%q) = %+v, %v; want %+v", s, got, ok, want)
			}
		})
	}
}

// The annotation a person reads in `kubectl get pod -o yaml`: field names,
// order and the time's form are fixed.
func TestInPlaceUpdateString(t *testing.T) {
	tests := map[string]struct {
		u    InPlaceUpdate
		want string
	}{
		"containers": {
			u: InPlaceUpdate{Revision: "5f7c9d", Time: time.Unix(1700000000, 0), Restarts: 3, Containers: []InPlaceContainer{
				{Name: "app", ImageID: "docker.io/library/app@sha256:abc", ContainerID: "containerd://123"}, {Name: "log"},
			}},
			want: `{"revision":"5f7c9d","updateTime":"2023-11-14T22:13:20Z","restartCount":3,"previousContainers":[` +
				`{"name":"app","imageID":"docker.io/library/app@sha256:abc","containerID":"containerd://123"},{"name":"log"}]}`,
		},
		"none": {
			u:    InPlaceUpdate{Revision: "5f7c9d", Time: time.Unix(1700000000, 0)},
			want: `{"revision":"5f7c9d","updateTime":"2023-11-14T22:13:20Z","restartCount":0}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.u.String(); got != tc.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// Pods an older everynode updated in place carry the text format; an
// upgrade in the middle of a rollout must not lose their updates.
func TestParseInPlaceUpdateTextFormat(t *testing.T) {
	tests := map[string]struct {
		in   string
		want InPlaceUpdate
	}{
		"containers": {
			in: "v1 5f7c9d 1700000000 3 app=docker.io/library/app@sha256:abc,containerd://123 log=,",
			want: InPlaceUpdate{Revision: "5f7c9d", Time: time.Unix(1700000000, 0).UTC(), Restarts: 3, Containers: []InPlaceContainer{
				{Name: "app", ImageID: "docker.io/library/app@sha256:abc", ContainerID: "containerd://123"}, {Name: "log"},
			}},
		},
		"no containers":        {in: "v1 h 1 0", want: InPlaceUpdate{Revision: "h", Time: time.Unix(1, 0).UTC()}},
		"extra spaces":         {in: "  v1  h 1  0   a=i,c ", want: InPlaceUpdate{Revision: "h", Time: time.Unix(1, 0).UTC(), Containers: []InPlaceContainer{{Name: "a", ImageID: "i", ContainerID: "c"}}}},
		"zero time, as Unix()": {in: "v1 h -62135596800 0", want: InPlaceUpdate{Revision: "h", Time: time.Time{}.UTC()}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseInPlaceUpdate(tc.in)
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseInPlaceUpdate(%q) = %+v, %v; want %+v", tc.in, got, ok, tc.want)
			}
			// Written again, it is JSON and reads back the same.
			again, ok := ParseInPlaceUpdate(got.String())
			if !ok || !reflect.DeepEqual(again, tc.want) || !strings.HasPrefix(got.String(), "{") {
				t.Errorf("rewritten as %q: %+v, %v", got.String(), again, ok)
			}
		})
	}
}

func TestParseInPlaceUpdateMalformed(t *testing.T) {
	const at = `"updateTime":"2023-11-14T22:13:20Z"`
	tests := map[string]string{
		"empty":                             "",
		"spaces":                            "  \n",
		"text: version only":                "v1",
		"text: other version":               "v2 h 1 0",
		"text: time not a number":           "v1 h x 0",
		"text: restarts not a number":       "v1 h 1 x",
		"text: restarts over int32":         "v1 h 1 2147483648",
		"text: negative restarts":           "v1 h 1 -1",
		"text: time past year 9999":         "v1 h 253402300800 0",
		"text: container without ids":       "v1 h 1 0 app",
		"text: container without =":         "v1 h 1 0 a,b",
		"text: container without name":      "v1 h 1 0 =a,b",
		"text: container one id":            "v1 h 1 0 app=a",
		"text: invalid UTF-8":               "v1 h 1 0 a=\xff,c",
		"json: open":                        "{",
		"json: empty object":                "{}",
		"json: null":                        "null",
		"json: array":                       `[{"revision":"h",` + at + `}]`,
		"json: string":                      `"v1 h 1 0"`,
		"json: no revision":                 `{` + at + `}`,
		"json: empty revision":              `{"revision":"",` + at + `}`,
		"json: no time":                     `{"revision":"h"}`,
		"json: time not RFC 3339":           `{"revision":"h","updateTime":"1700000000"}`,
		"json: time a number":               `{"revision":"h","updateTime":1700000000}`,
		"json: negative restarts":           `{"revision":"h",` + at + `,"restartCount":-1}`,
		"json: restarts over int32":         `{"revision":"h",` + at + `,"restartCount":2147483648}`,
		"json: restarts a string":           `{"revision":"h",` + at + `,"restartCount":"3"}`,
		"json: container without name":      `{"revision":"h",` + at + `,"previousContainers":[{"imageID":"i"}]}`,
		"json: container null":              `{"revision":"h",` + at + `,"previousContainers":[null]}`,
		"json: containers an object":        `{"revision":"h",` + at + `,"previousContainers":{"app":{}}}`,
		"json: field names in another case": `{"Revision":"h","UpdateTime":"2023-11-14T22:13:20Z"}`,
		"json: trailing data":               `{"revision":"h",` + at + `} x`,
		"json: two objects":                 `{"revision":"h",` + at + `}{}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if u, ok := ParseInPlaceUpdate(in); ok || !reflect.DeepEqual(u, InPlaceUpdate{}) {
				t.Errorf("ParseInPlaceUpdate(%q) = %+v, %v; want nothing, false", in, u, ok)
			}
		})
	}
}

// InPlaceUpdateOf reads both formats, and only an update to the pod's own
// revision.
func TestInPlaceUpdateOf(t *testing.T) {
	u := InPlaceUpdate{Revision: "new", Time: time.Unix(200, 0).UTC(), Restarts: 1, Containers: []InPlaceContainer{{Name: "app", ImageID: "i", ContainerID: "c"}}}
	tests := map[string]struct {
		hash, annotation string
		want             bool
	}{
		"json":                         {hash: "new", annotation: u.String(), want: true},
		"text, from before an upgrade": {hash: "new", annotation: "v1 new 200 1 app=i,c", want: true},
		"json, another revision":       {hash: "newer", annotation: u.String()},
		"text, another revision":       {hash: "newer", annotation: "v1 new 200 1 app=i,c"},
		"malformed":                    {hash: "new", annotation: "{"},
		"none":                         {hash: "new"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"controller-revision-hash": tc.hash}}}
			if tc.annotation != "" {
				pod.Annotations = map[string]string{everynodev1alpha1.AnnotationInPlaceUpdate: tc.annotation}
			}
			got, ok := InPlaceUpdateOf(pod)
			if ok != tc.want || (ok && !reflect.DeepEqual(got, u)) {
				t.Errorf("InPlaceUpdateOf = %+v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}

// FuzzParseInPlaceUpdate: no input panics the parser, and what it accepts,
// in either format, String writes as JSON that reads back to itself.
func FuzzParseInPlaceUpdate(f *testing.F) {
	f.Add(`{"revision":"5f7c9d","updateTime":"2023-11-14T22:13:20Z","restartCount":3,"previousContainers":[{"name":"app","imageID":"i","containerID":"c"}]}`)
	f.Add(`{"revision":"h","updateTime":"2023-11-14T22:13:20.5+01:00"}`)
	f.Add("v1 5f7c9d 1700000000 3 app=docker.io/library/app@sha256:abc,containerd://123 log=,")
	f.Add("v1 h 1 0")
	f.Add("v1 h 1 0 =a,b")
	f.Add("{")
	f.Fuzz(func(t *testing.T, in string) {
		u, ok := ParseInPlaceUpdate(in)
		if !ok {
			return
		}
		s := u.String()
		again, ok := ParseInPlaceUpdate(s)
		if !ok || again.String() != s {
			t.Fatalf("ParseInPlaceUpdate(%q) = %+v, written as %q, read back as %+v, %v", in, u, s, again, ok)
		}
	})
}

// runningPod is a pod whose containers run the images of its spec, ready.
func runningPod(images ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Labels: map[string]string{"controller-revision-hash": "old"}}}
	for i, img := range images {
		name := []string{"app", "log"}[i]
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: img})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: name, Image: img, ImageID: "id-" + img, ContainerID: "c-" + img, Ready: true, Started: ptr.To(true), RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(100, 0))}},
		})
	}
	return pod
}

func TestInPlacePatchAndDone(t *testing.T) {
	pod := runningPod("app:1", "log:1")
	target := runningPod("app:1", "log:2")
	raw, changes, ok := InPlacePatch(pod, target, "new", time.Unix(200, 0))
	if !ok {
		t.Fatal("no patch")
	}
	if changes != "log: log:1 -> log:2" {
		t.Errorf("changes %q", changes)
	}
	var p struct {
		Metadata struct {
			UID         string            `json:"uid"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []map[string]string `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata.UID != "u1" || p.Metadata.Labels["controller-revision-hash"] != "new" ||
		!reflect.DeepEqual(p.Spec.Containers, []map[string]string{{"name": "log", "image": "log:2"}}) {
		t.Errorf("patch %s", raw)
	}
	u, ok := ParseInPlaceUpdate(p.Metadata.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate])
	want := InPlaceUpdate{Revision: "new", Time: time.Unix(200, 0).UTC(), Restarts: 3, Containers: []InPlaceContainer{{Name: "log", ImageID: "id-log:1", ContainerID: "c-log:1"}}}
	if !ok || !reflect.DeepEqual(u, want) {
		t.Errorf("recorded %+v, want %+v", u, want)
	}

	// The kubelet's steps, as the pod's status shows them.
	pod.Spec.Containers[1].Image = "log:2"
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done before the kubelet restarted anything")
	}
	st := &pod.Status.ContainerStatuses[1]
	st.Image, st.ImageID, st.ContainerID, st.Ready, st.Started = "log:2", "", "", false, ptr.To(false)
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done while the new container is created")
	}
	if InPlaceStarted(pod, &u) {
		t.Error("started while the new container is created")
	}
	st.ImageID, st.ContainerID, st.Started = "id-log:2", "c-log:2", ptr.To(true)
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done before the new container is ready")
	}
	if !InPlaceStarted(pod, &u) {
		t.Error("not started once the new container runs")
	}
	st.Ready, st.State.Running.StartedAt = true, metav1.NewTime(time.Unix(250, 0))
	if done, at := InPlaceDone(pod, &u); !done || !at.Equal(time.Unix(250, 0)) {
		t.Errorf("done = %v at %v, want true at 250", done, at)
	}
	// Same digest under a new tag: another container, naming the spec's image.
	st.ImageID = "id-log:1"
	if done, _ := InPlaceDone(pod, &u); !done {
		t.Error("a new container of the same digest is not done")
	}
	st.ContainerID = "c-log:1"
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("the old container counts as done")
	}

	// Nothing to patch, or containers that do not pair up: recreate.
	if _, _, ok := InPlacePatch(pod, runningPod("app:1", "log:2"), "new", time.Unix(200, 0)); ok {
		t.Error("a patch with no image change")
	}
	if _, _, ok := InPlacePatch(pod, runningPod("app:2"), "new", time.Unix(200, 0)); ok {
		t.Error("a patch across different containers")
	}
}

func TestInPlacePatchInitContainers(t *testing.T) {
	pod := runningPod("app:1")
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}, {Name: "proxy", Image: "proxy:1", RestartPolicy: &always}}
	target := pod.DeepCopy()
	target.Spec.InitContainers[0].Image, target.Spec.InitContainers[1].Image = "setup:2", "proxy:2"
	raw, _, ok := InPlacePatch(pod, target, "new", time.Unix(1, 0))
	if !ok {
		t.Fatal("no patch")
	}
	var p struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			InitContainers []map[string]string `json:"initContainers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 2 {
		t.Errorf("init container images patched: %v", p.Spec.InitContainers)
	}
	u, _ := ParseInPlaceUpdate(p.Metadata.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate])
	// Only the sidecar restarts: a finished init container runs again only
	// with a new sandbox.
	if len(u.Containers) != 1 || u.Containers[0].Name != "proxy" {
		t.Errorf("waits for %+v, want the sidecar alone", u.Containers)
	}
}

// The controller reads the annotation of a pod updated in place once per
// version of the pod it sees (its pod memo keeps the result).
func BenchmarkParseInPlaceUpdate(b *testing.B) {
	u := InPlaceUpdate{Revision: "6b8f5kx9d", Time: time.Unix(1700000000, 0), Restarts: 3, Containers: []InPlaceContainer{
		{Name: "agent", ImageID: "docker.io/library/agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	}}
	c := u.Containers[0]
	for name, in := range map[string]string{
		"json": u.String(),
		"text": "v1 6b8f5kx9d 1700000000 3 " + c.Name + "=" + c.ImageID + "," + c.ContainerID,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ParseInPlaceUpdate(in); !ok {
					b.Fatal("not parsed")
				}
			}
		})
	}
}

// TestInPlaceGateDecisions is which pods carry the in-place readiness gate
// and which in-place updates close it, for each way a set can say so:
// inPlaceGatePolicy, the deprecated inPlaceReadinessGate, neither.
func TestInPlaceGateDecisions(t *testing.T) {
	const (
		always, never, ifServed = everynodev1alpha1.InPlaceGateAlways, everynodev1alpha1.InPlaceGateNever, everynodev1alpha1.InPlaceGateIfServed
	)
	// gates: what GatesNewPod says for served false, true; closes: what
	// ClosesGate says for (gated, listed) = (no, no), (no, yes), (yes, no),
	// (yes, yes).
	type want struct {
		policy everynodev1alpha1.InPlaceGatePolicy
		gates  [2]bool
		closes [4]bool
	}
	var (
		wantAlways   = want{always, [2]bool{true, true}, [4]bool{false, false, true, true}}
		wantNever    = want{never, [2]bool{false, false}, [4]bool{false, false, false, false}}
		wantIfServed = want{ifServed, [2]bool{false, true}, [4]bool{false, false, false, true}}
	)
	tests := map[string]struct {
		policy   everynodev1alpha1.InPlaceGatePolicy
		gate     *bool
		recreate bool
		want     want
	}{
		"neither field: Always":             {want: wantAlways},
		"inPlaceReadinessGate true: Always": {gate: ptr.To(true), want: wantAlways},
		"inPlaceReadinessGate false: Never": {gate: ptr.To(false), want: wantNever},
		"Always":                            {policy: always, want: wantAlways},
		"Never":                             {policy: never, want: wantNever},
		"IfServed":                          {policy: ifServed, want: wantIfServed},
		"IfServed over a disagreeing inPlaceReadinessGate": {policy: ifServed, gate: ptr.To(true), want: wantIfServed},
		"Never with agreeing inPlaceReadinessGate":         {policy: never, gate: ptr.To(false), want: wantNever},
		// A set that recreates gives new pods no gate; what an in-place
		// update would do reads the policy all the same.
		"Always, Recreate": {policy: always, recreate: true, want: want{always, [2]bool{false, false}, wantAlways.closes}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := &everynodev1alpha1.DaemonSet{}
			ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
				PodUpdatePolicy: everynodev1alpha1.PodUpdateInPlaceIfPossible, InPlaceGatePolicy: tc.policy, InPlaceReadinessGate: tc.gate,
			}
			if tc.recreate {
				ds.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = everynodev1alpha1.PodUpdateRecreate
			}
			s := UpdateStrategy(ds)
			if s.GatePolicy != tc.want.policy {
				t.Errorf("GatePolicy %q, want %q", s.GatePolicy, tc.want.policy)
			}
			for i, served := range []bool{false, true} {
				if got := s.GatesNewPod(served); got != tc.want.gates[i] {
					t.Errorf("GatesNewPod(served=%v) = %v, want %v", served, got, tc.want.gates[i])
				}
			}
			for i, c := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				if got := s.ClosesGate(c[0], c[1]); got != tc.want.closes[i] {
					t.Errorf("ClosesGate(gated=%v, listed=%v) = %v, want %v", c[0], c[1], got, tc.want.closes[i])
				}
			}
			if got, want := s.GateNeedsListing(), tc.want.policy == ifServed; got != want {
				t.Errorf("GateNeedsListing() = %v, want %v", got, want)
			}
			if got, want := s.GateNeedsService(), tc.want.policy == ifServed && !tc.recreate; got != want {
				t.Errorf("GateNeedsService() = %v, want %v", got, want)
			}
		})
	}
}
