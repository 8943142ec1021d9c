package soak

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// The end of a run: the sets released and their convergence awaited
// (invariant 4).

// setStatus is a set's status as a SetObs, from the API.
func (r *runner) setStatus(ctx context.Context, s SetSpec) (*SetObs, error) {
	if s.Kind == KindApps {
		ds, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &SetObs{Name: s.Name, Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
			Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable}, nil
	}
	ds, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &SetObs{Name: s.Name, Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
		Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable,
		UpdateRevision: ds.Status.UpdateRevision}, nil
}

// waitConverged polls the sets every 2 s until they have all converged
// at once, for at most bound; it returns when, the last set to get
// there (and when, after from), and what the ones that did not say.
func (r *runner) waitConverged(ctx context.Context, bound time.Duration, from time.Time) (time.Time, string, []string) {
	first := map[string]time.Time{}
	deadline := time.Now().Add(bound)
	var missing []string
	for {
		missing = nil
		for _, s := range Catalog() {
			st, err := r.setStatus(ctx, s)
			switch {
			case err != nil:
				missing = append(missing, fmt.Sprintf("%s: %v", s.Name, err))
				delete(first, s.Name)
			case !st.Converged():
				missing = append(missing, fmt.Sprintf("%s: generation %d observed %d, desired %d updated %d available %d",
					s.Name, st.Generation, st.ObservedGeneration, st.Desired, st.Updated, st.Available))
				delete(first, s.Name)
			default:
				if _, ok := first[s.Name]; !ok {
					first[s.Name] = time.Now()
				}
			}
		}
		if len(missing) == 0 {
			slowest, at := "", time.Time{}
			for name, t := range first {
				if t.After(at) {
					slowest, at = name, t
				}
			}
			return time.Now(), fmt.Sprintf("%s, %s after the release", slowest, at.Sub(from).Round(time.Second)), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, "", missing
		}
		sleep(ctx, 2*time.Second)
	}
}

// releaseAndConverge lets every set go after the last fault: a new good
// template (clears a bad image and a rollout that stopped itself),
// partition, canary and pause lifted, the old pods of OnDelete sets
// deleted; then waits for every set to converge (invariant 4).
func (r *runner) releaseAndConverge(ctx context.Context) Convergence {
	conv := Convergence{Bound: ConvergeBound(r.o.Nodes)}
	for _, f := range r.faults {
		if f.End.After(conv.LastFaultEnd) {
			conv.LastFaultEnd = f.End
		}
	}
	r.say("releasing the sets")
	// Each set on its own goroutine: a set is released once the traffic on
	// it is done (its lock), and twenty one after another took 27 s.
	var wg sync.WaitGroup
	for i, s := range Catalog() {
		wg.Go(func() {
			r.setLocks[i].Lock()
			defer r.setLocks[i].Unlock()
			r.release(ctx, s)
		})
	}
	wg.Wait()
	conv.Released = time.Now()
	r.say("waiting up to %s for every set to converge", conv.Bound)
	conv.Converged, conv.Slowest, conv.NotConverged = r.waitConverged(ctx, conv.Bound, conv.Released)
	return conv
}

// release lets one set go: made again if the traffic left it missing,
// a new good template, its rollout's holds lifted, and an OnDelete set's
// old pods deleted once the controller has seen the new template.
func (r *runner) release(ctx context.Context, s SetSpec) {
	// A set the traffic failed to make again (its delete outlasted the
	// wait, or the API stayed away) is made here: its absence is the
	// soak's doing, not the controller's, and the report says so.
	if _, err := r.setStatus(ctx, s); apierrors.IsNotFound(err) {
		r.logf("release: %s is missing; making it again", s.Name)
		r.rec.act(ActObs{Kind: ActCreateSet, Set: s.Name})
		r.admit("sets the traffic left missing, made again at the release", 1)
		if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.createSet(ctx, s) }); err != nil {
			r.logf("release %s: %v", s.Name, err)
		}
	}
	image := s.Image(fmt.Sprintf("v%d", r.nextRev(s.Name)))
	var err error
	if s.Kind == KindApps {
		err = r.changeApps(ctx, s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = image })
	} else {
		err = r.changeEverynode(ctx, s, func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Image = image
			if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
				ru.Paused, ru.NodeSelector = false, nil
				if ru.Partition != nil {
					ru.Partition = ptr0()
				}
			}
		})
	}
	if err != nil {
		r.logf("release %s: %v", s.Name, err)
	}
	if !s.OnDelete {
		return
	}
	// Once the controller made the new revision, the old pods go, as a
	// user rolls them.
	err = retry(ctx, 2*time.Minute, func(ctx context.Context) error {
		if st, err := r.setStatus(ctx, s); err != nil || st.ObservedGeneration < st.Generation {
			return fmt.Errorf("generation not observed yet (%v)", err)
		}
		return r.deleteOldPods(ctx, s, -1)
	})
	if err != nil {
		r.logf("release %s: %v", s.Name, err)
	}
}

func ptr0() *intstr.IntOrString {
	v := intstr.FromInt32(0)
	return &v
}
