package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

// Errors of history and undo, wrapped with the set and the revisions known
// so the message says what to do; match them with errors.Is.
var (
	errNoHistory          = errors.New("no rollout history")
	errNoPreviousRevision = errors.New("no previous revision to roll back to")
	errUnknownRevision    = errors.New("unknown revision")
)

// revisionsOf returns the ControllerRevisions of ds, oldest first: those in
// its namespace, matching its selector, whose controller is ds itself (by
// UID, so a set deleted and re-created under the same name does not inherit
// the history of the old one).
func revisionsOf(ctx context.Context, apps appsv1client.AppsV1Interface, ds *everynodev1alpha1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of daemon set %q: %w", ds.Name, err)
	}
	list, err := apps.ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list ControllerRevisions of daemon set %q: %w", ds.Name, err)
	}
	var revs []*appsv1.ControllerRevision
	for i := range list.Items {
		if controlledBy(&list.Items[i], ds) {
			revs = append(revs, &list.Items[i])
		}
	}
	revision.SortByRevision(revs)
	return revs, nil
}

// controlledBy reports whether ds is the controller of rev.
func controlledBy(rev *appsv1.ControllerRevision, ds *everynodev1alpha1.DaemonSet) bool {
	ref := metav1.GetControllerOfNoCopy(rev)
	if ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == everynodev1alpha1.GroupName
}

// pickRevision returns the revision an undo restores: to, or when to is 0
// the previous one (the second highest number), as kubectl's findHistory.
// revs must be sorted oldest first.
func pickRevision(ds *everynodev1alpha1.DaemonSet, revs []*appsv1.ControllerRevision, to int64) (*appsv1.ControllerRevision, error) {
	if len(revs) == 0 {
		return nil, noHistoryError(ds)
	}
	if to == 0 {
		if len(revs) < 2 {
			return nil, fmt.Errorf("%w: daemon set %q has only revision %d", errNoPreviousRevision, ds.Name, revs[0].Revision)
		}
		return revs[len(revs)-2], nil
	}
	return findRevision(ds, revs, to)
}

// findRevision returns the revision numbered n.
func findRevision(ds *everynodev1alpha1.DaemonSet, revs []*appsv1.ControllerRevision, n int64) (*appsv1.ControllerRevision, error) {
	if len(revs) == 0 {
		return nil, noHistoryError(ds)
	}
	// The newest with that number: the controller renumbers a revision it
	// reuses, so duplicates are at most transient.
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].Revision == n {
			return revs[i], nil
		}
	}
	known := make([]string, len(revs))
	for i, r := range revs {
		known[i] = strconv.FormatInt(r.Revision, 10)
	}
	return nil, fmt.Errorf("%w %d: daemon set %q has revisions %s", errUnknownRevision, n, ds.Name, strings.Join(known, ", "))
}

func noHistoryError(ds *everynodev1alpha1.DaemonSet) error {
	return fmt.Errorf("daemon set %q has %w: no ControllerRevision in namespace %q is controlled by it (the everynode controller records one per template it rolls out)", ds.Name, errNoHistory, ds.Namespace)
}

// atRevision returns a copy of ds with the pod template and node overrides
// that rev stores: the set as it would be after rolling back to rev. The
// stored format is parsed by the controller's own revision package, so the
// writer and this reader cannot drift apart.
func atRevision(ds *everynodev1alpha1.DaemonSet, rev *appsv1.ControllerRevision) (*everynodev1alpha1.DaemonSet, error) {
	out := ds.DeepCopy()
	if err := revision.Apply(rev.Data.Raw, out); err != nil {
		return nil, fmt.Errorf("revision %d (%s) of daemon set %q: %w", rev.Revision, rev.Name, ds.Name, err)
	}
	return out, nil
}
