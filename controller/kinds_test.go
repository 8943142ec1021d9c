package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// upstreamPatch is k8s.io/kubernetes/pkg/controller/daemon's getPatch,
// copied: the revision data kube-controller-manager writes, and what
// `kubectl rollout undo` and upstream's e2e suite (daemon.Match, byte
// equality) expect of an apps/v1 set's revisions.
func upstreamPatch(t *testing.T, ds *appsv1.DaemonSet) []byte {
	t.Helper()
	dsBytes, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]interface{}
	if err := json.Unmarshal(dsBytes, &raw); err != nil {
		t.Fatal(err)
	}
	objCopy := make(map[string]interface{})
	specCopy := make(map[string]interface{})
	spec := raw["spec"].(map[string]interface{})
	template := spec["template"].(map[string]interface{})
	specCopy["template"] = template
	template["$patch"] = "replace"
	objCopy["spec"] = specCopy
	patch, err := json.Marshal(objCopy)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

func appsSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-apps-" + name),
			Generation: 2, ResourceVersion: "7",
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "2"},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{{Name: "agent", Image: "agent:1", Ports: []corev1.ContainerPort{{ContainerPort: 9000}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
		Status: appsv1.DaemonSetStatus{
			Conditions: []appsv1.DaemonSetCondition{{Type: "Someone", Status: corev1.ConditionTrue, Reason: "Else"}},
		},
	}
}

// The takeover controller reconciles an apps/v1 DaemonSet through the
// same sync as everynode's kind, and writes what kube-controller-manager
// writes: pods and a revision owned by the apps/v1 set, revision data in
// upstream's bytes, the template-generation label, and a status that
// names the counts and leaves the conditions alone. The probe set is not
// its to touch.
func TestTakeoverSyncsAnAppsDaemonSet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ds := appsSet("agent")
	probe := appsSet("probe")
	probe.UID = "uid-probe"
	probe.Labels = map[string]string{everynodev1alpha1.LabelTakeoverProbe: "true"}
	objs := []runtime.Object{ds, probe}
	for _, n := range []string{"node-1", "node-2"} {
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	kube := kubefake.NewClientset(objs...)
	seq := 0
	kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		// The fake API server implements neither generateName nor UIDs.
		pod := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		seq++
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, seq)
		pod.UID = types.UID(pod.Name)
		return false, nil, nil
	})
	inf := informers.NewSharedInformerFactory(kube, 0)
	c, err := New(ctx, Config{
		KubeClient:     kube,
		Client:         everynodefake.NewSimpleClientset(),
		AppsDaemonSets: inf.Apps().V1().DaemonSets(),
		Pods:           inf.Core().V1().Pods(),
		Nodes:          inf.Core().V1().Nodes(),
		Revisions:      inf.Apps().V1().ControllerRevisions(),
		Recorder:       record.NewFakeRecorder(100),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.pacer.SetStatusInterval(0)
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())

	key := cache.NewObjectName(ns, "agent")
	// The first sync makes the revision; the pods follow once the cache
	// shows it, as for everynode's kind.
	syncUntil(t, c, key, func() bool { return len(actions(kube, "create", "pods", "")) == 2 })

	revs := actions(kube, "create", "controllerrevisions", "")
	if len(revs) != 1 {
		t.Fatalf("%d revisions created, want 1", len(revs))
	}
	rev := revs[0].(clienttesting.CreateAction).GetObject().(*appsv1.ControllerRevision)
	if want := upstreamPatch(t, ds); !bytes.Equal(rev.Data.Raw, want) {
		t.Errorf("revision data\n%s\nwant upstream's\n%s", rev.Data.Raw, want)
	}
	if ref := placement.AppsControllerRef(rev); ref == nil || ref.UID != ds.UID {
		t.Errorf("revision owner %+v, want the apps/v1 set", rev.OwnerReferences)
	}
	hash := rev.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	for _, a := range actions(kube, "create", "pods", "") {
		pod := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "DaemonSet" || ref.UID != ds.UID {
			t.Errorf("pod owner %+v, want the apps/v1 set", pod.OwnerReferences)
		}
		if pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash || pod.Labels["pod-template-generation"] != "2" {
			t.Errorf("pod labels %v, want hash %s and pod-template-generation 2", pod.Labels, hash)
		}
	}

	patches := actions(kube, "patch", "daemonsets", "status")
	if len(patches) == 0 {
		t.Fatal("no status written")
	}
	for _, p := range patches {
		if name := p.(clienttesting.PatchAction).GetName(); name != "agent" {
			t.Errorf("status of %s written; only agent's is the controller's", name)
		}
	}
	var got appsv1.DaemonSet
	if err := json.Unmarshal(patches[len(patches)-1].(clienttesting.PatchAction).GetPatch(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.DesiredNumberScheduled != 2 || got.Status.ObservedGeneration != 2 || got.Status.Conditions != nil {
		t.Errorf("status patch %+v, want desired 2, observedGeneration 2 and no conditions", got.Status)
	}
	server, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(server.Status.Conditions) != 1 {
		t.Errorf("conditions after the status write %+v, want the one someone else wrote", server.Status.Conditions)
	}

	// Once the cache shows the pods and the status, a sync writes none:
	// the fields apps/v1 does not have are not a difference. (With them
	// counted, every sync writes.)
	settled := false
	for i := 0; i < 20 && !settled; i++ {
		time.Sleep(50 * time.Millisecond) // the informers catch up
		before := len(actions(kube, "patch", "daemonsets", "status"))
		if err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
		settled = len(actions(kube, "patch", "daemonsets", "status")) == before
	}
	if !settled {
		t.Error("every sync wrote the status again")
	}
	if n := len(actions(kube, "create", "pods", "")); n != 2 {
		t.Errorf("%d pods created over the syncs, want 2: the controller must count the pods it made", n)
	}

	if err := c.sync(ctx, cache.NewObjectName(ns, "probe")); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetNamespace() == ns && a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == "probe" {
				t.Errorf("the takeover controller sent %s %s for the probe set", a.GetVerb(), a.GetResource().Resource)
			}
		}
	}
}

// syncUntil syncs key until done holds, letting the informers catch up
// between syncs.
func syncUntil(t *testing.T, c *Controller, key cache.ObjectName, done func() bool) {
	t.Helper()
	for i := 0; i < 50 && !done(); i++ {
		if err := c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !done() {
		t.Fatal("the syncs never got there")
	}
}

// actions returns the kube client actions of verb on resource (and
// subresource).
func actions(kube *kubefake.Clientset, verb, resource, sub string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range kube.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == sub {
			out = append(out, a)
		}
	}
	return out
}

// A revision of an apps/v1 set that the API server has and the cache does
// not show yet (the sync right after the one that made it) is the set's
// own, not a name collision: its owner is the apps/v1 set. Counted as a
// collision, each sync raised collisionCount, which changes the hash, made
// a revision under the new name and replaced pods, for as long as the
// revision cache lagged (found by the soak after a kube-apiserver restart).
func TestAppsRevisionNotYetCachedIsNoCollision(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ds := appsSet("agent")
	conv := placement.FromApps(ds)
	own, err := revision.New(conv, revision.HashOf(conv), 1)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset(ds, own)
	// The controller's caches come from a server without the revision:
	// they never show it, as a lagging watch would not yet.
	lagging := informers.NewSharedInformerFactory(kubefake.NewClientset(ds), 0)
	c, err := New(ctx, Config{
		KubeClient:     kube,
		Client:         everynodefake.NewSimpleClientset(),
		AppsDaemonSets: lagging.Apps().V1().DaemonSets(),
		Pods:           lagging.Core().V1().Pods(),
		Nodes:          lagging.Core().V1().Nodes(),
		Revisions:      lagging.Apps().V1().ControllerRevisions(),
		Recorder:       record.NewFakeRecorder(100),
	})
	if err != nil {
		t.Fatal(err)
	}
	lagging.Start(ctx.Done())
	lagging.WaitForCacheSync(ctx.Done())

	if err := c.sync(ctx, cache.NewObjectName(ns, "agent")); err != nil {
		t.Fatalf("sync: %v", err)
	}
	server, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cc := server.Status.CollisionCount; cc != nil {
		t.Errorf("collisionCount raised to %d for the set's own revision", *cc)
	}
	if n := len(actions(kube, "create", "controllerrevisions", "")); n != 1 {
		t.Errorf("%d revision creates, want the 1 that finds the set's own", n)
	}
}
