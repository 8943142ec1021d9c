package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	everynodeinformers "everynode.io/everynode/client/informers/externalversions/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// setKind is where the controller reads and writes the sets of one kind:
// everynode.io's DaemonSet, or in takeover mode apps/v1's. A Controller
// serves one kind; takeover runs a second Controller over the same pods,
// nodes and revisions. Everything past this boundary is one code path:
// an apps/v1 set is converted to the everynode type as it is read
// (placement.FromApps) and its status converted back as it is written,
// and the few rules that differ by kind ask placement.IsApps.
type setKind interface {
	// informer is the sets' shared informer, for event handlers and the
	// node-constraint index.
	informer() cache.SharedIndexInformer
	// fromCache converts an object of the informer; false for anything
	// that is not a set this controller reconciles.
	fromCache(obj interface{}) (*everynodev1alpha1.DaemonSet, bool)
	// get and list read the cache. get returns a NotFound error for a set
	// this controller does not reconcile.
	get(namespace, name string) (*everynodev1alpha1.DaemonSet, error)
	list(namespace string) ([]*everynodev1alpha1.DaemonSet, error)
	// getLive reads the set from the API server.
	getLive(ctx context.Context, namespace, name string) (*everynodev1alpha1.DaemonSet, error)
	// writeStatus writes ds.Status (as project leaves it) over the set at
	// ds.ResourceVersion and returns the set the server holds then.
	writeStatus(ctx context.Context, ds *everynodev1alpha1.DaemonSet) (*everynodev1alpha1.DaemonSet, error)
	// project keeps the part of a status this kind stores: comparing a
	// computed status with the cached one must ignore what is never
	// written.
	project(st everynodev1alpha1.DaemonSetStatus) everynodev1alpha1.DaemonSetStatus
	// ownerRef returns the controller reference of a pod or revision that
	// names a set of this kind, or nil.
	ownerRef(obj metav1.Object) *metav1.OwnerReference
	// client is the everynode.io client for what only that kind has (the
	// rollback of rollingUpdate.onFailure); nil for apps/v1, which has no
	// such field.
	everynode() versioned.Interface
}

// everynodeSets is the everynode.io/v1alpha1 DaemonSet kind.
type everynodeSets struct {
	inf    everynodeinformers.DaemonSetInformer
	lister everynodelisters.DaemonSetLister
	client versioned.Interface
}

func (k everynodeSets) informer() cache.SharedIndexInformer { return k.inf.Informer() }

func (k everynodeSets) fromCache(obj interface{}) (*everynodev1alpha1.DaemonSet, bool) {
	ds, ok := obj.(*everynodev1alpha1.DaemonSet)
	return ds, ok
}

func (k everynodeSets) get(namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
	return k.lister.DaemonSets(namespace).Get(name)
}

func (k everynodeSets) list(namespace string) ([]*everynodev1alpha1.DaemonSet, error) {
	return k.lister.DaemonSets(namespace).List(labels.Everything())
}

func (k everynodeSets) getLive(ctx context.Context, namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
	return k.client.EverynodeV1alpha1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (k everynodeSets) writeStatus(ctx context.Context, ds *everynodev1alpha1.DaemonSet) (*everynodev1alpha1.DaemonSet, error) {
	return k.client.EverynodeV1alpha1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
}

func (everynodeSets) project(st everynodev1alpha1.DaemonSetStatus) everynodev1alpha1.DaemonSetStatus {
	return st
}

func (everynodeSets) ownerRef(obj metav1.Object) *metav1.OwnerReference {
	return placement.ControllerRef(obj)
}

func (k everynodeSets) everynode() versioned.Interface { return k.client }

// appsSets is the apps/v1 DaemonSet kind, reconciled in takeover mode.
// Sets labelled everynode.io/takeover-probe are left alone: they are the
// probe that tells whether kube-controller-manager's DaemonSet controller
// runs too (package takeover).
type appsSets struct {
	inf    appsinformers.DaemonSetInformer
	lister appslisters.DaemonSetLister
	client kubernetes.Interface
}

func isProbe(ds *appsv1.DaemonSet) bool {
	_, ok := ds.Labels[everynodev1alpha1.LabelTakeoverProbe]
	return ok
}

func (k appsSets) informer() cache.SharedIndexInformer { return k.inf.Informer() }

func (k appsSets) fromCache(obj interface{}) (*everynodev1alpha1.DaemonSet, bool) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || isProbe(ds) {
		return nil, false
	}
	return placement.FromApps(ds), true
}

func (k appsSets) get(namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
	ds, err := k.lister.DaemonSets(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	if isProbe(ds) {
		return nil, apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
	}
	return placement.FromApps(ds), nil
}

func (k appsSets) list(namespace string) ([]*everynodev1alpha1.DaemonSet, error) {
	sets, err := k.lister.DaemonSets(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*everynodev1alpha1.DaemonSet, 0, len(sets))
	for _, ds := range sets {
		if !isProbe(ds) {
			out = append(out, placement.FromApps(ds))
		}
	}
	return out, nil
}

func (k appsSets) getLive(ctx context.Context, namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
	ds, err := k.client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return placement.FromApps(ds), nil
}

// writeStatus sends a JSON merge patch of the status subresource that
// names every field apps/v1 has (zeros included: a merge patch leaves out
// nothing it does not name) and the resourceVersion, so it is refused
// with a conflict over a newer set exactly as an update would be. Unlike
// an update it leaves status.conditions as they are, which is what
// kube-controller-manager does: it never sets them, but keeps what others
// write there.
func (k appsSets) writeStatus(ctx context.Context, ds *everynodev1alpha1.DaemonSet) (*everynodev1alpha1.DaemonSet, error) {
	patch, err := appsStatusPatch(ds)
	if err != nil {
		return nil, err
	}
	written, err := k.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, err
	}
	return placement.FromApps(written), nil
}

// appsStatusPatch is the merge patch writeStatus sends.
func appsStatusPatch(ds *everynodev1alpha1.DaemonSet) ([]byte, error) {
	st := placement.AppsStatus(&ds.Status)
	status := map[string]any{
		"currentNumberScheduled": st.CurrentNumberScheduled,
		"numberMisscheduled":     st.NumberMisscheduled,
		"desiredNumberScheduled": st.DesiredNumberScheduled,
		"numberReady":            st.NumberReady,
		"observedGeneration":     st.ObservedGeneration,
		"updatedNumberScheduled": st.UpdatedNumberScheduled,
		"numberAvailable":        st.NumberAvailable,
		"numberUnavailable":      st.NumberUnavailable,
		// nil clears it, as an update without it would.
		"collisionCount": st.CollisionCount,
	}
	if ds.ResourceVersion == "" {
		return nil, errors.New("status patch of an apps/v1 DaemonSet needs its resourceVersion")
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": ds.ResourceVersion, "uid": ds.UID},
		"status":   status,
	})
	if err != nil {
		return nil, fmt.Errorf("encode status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return patch, nil
}

func (appsSets) project(st everynodev1alpha1.DaemonSetStatus) everynodev1alpha1.DaemonSetStatus {
	a := placement.AppsStatus(&st)
	return placement.FromApps(&appsv1.DaemonSet{Status: a}).Status
}

func (appsSets) ownerRef(obj metav1.Object) *metav1.OwnerReference {
	return placement.AppsControllerRef(obj)
}

func (appsSets) everynode() versioned.Interface { return nil }
