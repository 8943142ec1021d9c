package controller

import (
	"fmt"
	"reflect"
	"testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"k8s.io/client-go/tools/cache"
)

// TestInPlaceUpdateOverAnUnfinishedOne changes the image again while an
// in-place update is under way, gate closed (policy Always), as the soak
// did to s07-inplace: the pods patched to the second image, their gates
// still closed, are of a revision that is no longer the update revision.
// The rollout must take them on to the third image (and open their gates)
// rather than leave them closed for a rollout that never comes. Whether
// the kubelet has run the second image yet or not, every pod must end on
// the third, in service, with no pod created or deleted.
func TestInPlaceUpdateOverAnUnfinishedOne(t *testing.T) {
	for _, kubeletBetween := range []bool{false, true} {
		name := "second image not started"
		if kubeletBetween {
			name = "second image running, gate closed"
		}
		t.Run(name, func(t *testing.T) {
			f, ds := gatedSetInService(t, 4)
			ds = f.changeTemplate(ds, "agent:2")
			f.mustSync(ds) // closes the gates of maxUnavailable pods, patches them
			f.syncCaches()
			if kubeletBetween {
				f.kubelet()
			}
			ds = f.changeTemplate(ds, "agent:3")
			f.rollOut(ds, nil)
			for _, p := range f.podList() {
				if got := p.Spec.Containers[0].Image; got != "agent:3" {
					t.Errorf("pod %s runs %s, want agent:3", p.Name, got)
				}
				if podDown(p) {
					t.Errorf("pod %s is out of service: %v", p.Name, p.Status.Conditions)
				}
			}
		})
	}
}

// TestInPlaceGateStaysOpenAfterTheUpdate: a pod updated in place whose
// container later turns not ready (its kubelet restarted it) keeps its
// gate open: the update is over, and the kubelet reports the container.
// The soak's s07-inplace had such gates closed under policy Always, with
// a message about an EndpointSlice, and so held out of service after
// their containers recovered. Then the set moves on, and the rollout takes
// the pod along like the others.
func TestInPlaceGateStaysOpenAfterTheUpdate(t *testing.T) {
	f, ds := gatedSetInService(t, 4)
	ds = f.changeTemplate(ds, "agent:2")
	f.rollOut(ds, nil)

	p := f.podList()[0].DeepCopy()
	p.Status.ContainerStatuses[0].Ready = false
	p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
	f.update(p)
	f.mustSync(ds)
	if _, status := f.podWrites(); status != 0 {
		t.Errorf("%d gate writes after a finished update's container turned not ready, want none", status)
	}
	f.syncCaches()
	if g := placement.InPlaceGateCondition(f.podList()[0]); !placement.ConditionReady(g) {
		t.Errorf("gate of %s after its container turned not ready: %v, want it left True", p.Name, g)
	}

	ds = f.changeTemplate(ds, "agent:3")
	f.rollOut(ds, nil)
	for _, p := range f.podList() {
		if got := p.Spec.Containers[0].Image; got != "agent:3" {
			t.Errorf("pod %s runs %s, want agent:3", p.Name, got)
		}
	}
}

// TestInPlaceIfServedListedAndChangedAgain: a pod patched under IfServed
// while unlisted, that a slice lists just as the set changes again. One
// sync both re-patches it (the rolling update closes its gate first, as it
// is listed now) and looks for late closings on the view read before the
// patch, which still shows the gate open. Closed twice, the second closing
// never shows as a change of the gate, and its expectation held the set
// out of every sync until the TTL, with nothing to wake it after: the
// soak's s07-inplace stall. The rolling update's pods are not the late
// closings' business.
func TestInPlaceIfServedListedAndChangedAgain(t *testing.T) {
	f, ds, pod := patchedUnlisted(t)
	f.add(endpointSlice(ns, "agent-abcde", podRef(pod)))
	ds = f.changeTemplate(ds, "agent:3")
	f.mustSync(ds)
	if got, want := f.podWriteLog()[pod.Name], []string{"gate False", "patch"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writes %q in the sync after the slice and the change, want %q", got, want)
	}
	f.syncCaches()
	if !f.c.state.satisfied(cache.MetaObjectToName(ds)) {
		c, d, u := f.c.state.pending(cache.MetaObjectToName(ds))
		t.Errorf("the set still waits for %d creations, %d deletions, %d updates once the cache shows every write", c, d, u)
	}
	f.kubelet()
	f.mustSync(ds)
	f.syncCaches()
	f.kubelet()
	if p := f.podList()[0]; podDown(p) || p.Spec.Containers[0].Image != "agent:3" {
		t.Errorf("pod %s runs %s, in service %v; want agent:3 in service", p.Name, p.Spec.Containers[0].Image, !podDown(p))
	}
}

// gatedSetInService is a set that updates in place with the gate
// (policy Always) on nodes nodes, its pods running and in service, their
// gates open.
func gatedSetInService(t *testing.T, nodes int) (*fixture, *everynodev1alpha1.DaemonSet) {
	f := newFixture(t)
	addNodes(f, nodes)
	ds := inPlaceSet(true)
	addSetWithRevision(f, ds)
	f.settle(ds)
	f.kubelet()
	f.settle(ds) // opens the gates
	f.kubelet()
	return f, ds
}
