package rollout

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/placement/revision"
)

const testNamespace = "ns1"

// fixture is a Factory over the fake clientsets.
type fixture struct {
	namespace string
	everynode *everynodefake.Clientset
	kube      *kubefake.Clientset
}

func newFixture(objs ...runtime.Object) *fixture {
	var sets, kubeObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*everynodev1alpha1.DaemonSet); ok {
			sets = append(sets, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	return &fixture{
		namespace: testNamespace,
		everynode: everynodefake.NewSimpleClientset(sets...),
		kube:      kubefake.NewClientset(kubeObjs...),
	}
}

func (f *fixture) Namespace() (string, error)                        { return f.namespace, nil }
func (f *fixture) EverynodeClient() (versioned.Interface, error)     { return f.everynode, nil }
func (f *fixture) AppsClient() (appsv1client.AppsV1Interface, error) { return f.kube.AppsV1(), nil }

// run executes the rollout command with args and returns what it printed.
func (f *fixture) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := newCmdRollout(f, streams, func() time.Time { return restartTime })
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// set returns the DaemonSet named name as the fake holds it now.
func (f *fixture) set(t *testing.T, name string) *everynodev1alpha1.DaemonSet {
	t.Helper()
	ds, err := f.everynode.EverynodeV1alpha1().DaemonSets(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get set %s: %v", name, err)
	}
	return ds
}

// writes returns the actions of a verb ("update", "patch") on daemonsets.
func (f *fixture) writes(verb string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range f.everynode.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "daemonsets" {
			out = append(out, a)
		}
	}
	return out
}

// newSet returns a rolled-out set with one container "app" running image.
func newSet(name, image string, edits ...func(*everynodev1alpha1.DaemonSet)) *everynodev1alpha1.DaemonSet {
	labels := map[string]string{"app": name}
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
			Generation: 1, ResourceVersion: "1",
		},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
			UpdateStrategy: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
		},
		Status: everynodev1alpha1.DaemonSetStatus{
			ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
			UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3,
		},
	}
	for _, e := range edits {
		e(ds)
	}
	return ds
}

// newRevision returns the ControllerRevision the controller writes for ds
// with its template's image set to image and the set annotated with cause
// (none if empty).
func newRevision(t *testing.T, ds *everynodev1alpha1.DaemonSet, number int64, image, cause string, edits ...func(*everynodev1alpha1.DaemonSet)) *appsv1.ControllerRevision {
	t.Helper()
	at := ds.DeepCopy()
	at.Spec.Template.Spec.Containers[0].Image = image
	delete(at.Annotations, everynodev1alpha1.AnnotationChangeCause)
	if cause != "" {
		metav1.SetMetaDataAnnotation(&at.ObjectMeta, everynodev1alpha1.AnnotationChangeCause, cause)
	}
	for _, e := range edits {
		e(at)
	}
	rev, err := revision.New(at, revision.HashOf(at), number)
	if err != nil {
		t.Fatalf("revision: %v", err)
	}
	return rev
}

// chunkWriter is an io.Writer for a command running in another goroutine:
// it keeps what was written and hands each write to the test.
type chunkWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	chunks chan string
}

func newChunkWriter() *chunkWriter { return &chunkWriter{chunks: make(chan string, 100)} }

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.chunks <- string(p)
	return len(p), nil
}

func (w *chunkWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// mustContain fails unless s contains every part.
func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("output lacks %q:\n%s", p, s)
		}
	}
}
