package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"

	"everynode.io/everynode/controller/plan"
)

// sync brings one set's pods, revisions and status in line with its spec.
// It reads only caches, does O(nodes + pods of the set) work besides the
// API calls it makes, and is never run twice at once for the same key (the
// work queue guarantees it).
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "daemonset", key.String())
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	defer func() { logger.V(4).Info("Finished syncing DaemonSet", "duration", c.clock.Since(start)) }()

	ds, err := c.sets.get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		// Its pods and revisions carry owner references: the garbage
		// collector removes them.
		logger.V(3).Info("DaemonSet is gone")
		c.state.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get DaemonSet %s from cache: %w", key, err)
	}
	ds = c.state.freshest(ds)
	if sel := ds.Spec.Selector; sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		c.recorder.Event(ds, corev1.EventTypeWarning, ReasonSelectingAll, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		// Being deleted: its revisions may already be gone, so neither a
		// status nor a rollout can be trusted (upstream does the same).
		return nil
	}

	nodes, err := c.nodes.get(c.nodeLister)
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	sel, err := setSelector(ds)
	if err != nil {
		return err
	}
	adopt := &adoption{c: c, ds: ds}
	revs, err := c.claimRevisions(ctx, ds, sel, adopt)
	if err != nil {
		return fmt.Errorf("claim revisions of DaemonSet %s: %w", key, err)
	}
	cur, old, err := c.constructHistory(ctx, ds, revs)
	if err != nil {
		return fmt.Errorf("construct revisions of DaemonSet %s: %w", key, err)
	}
	hash := cur.Labels[revision.HashLabel]
	if wait, err := c.markUnmarked(ctx, ds); err != nil {
		return fmt.Errorf("mark the orphaned pods of DaemonSet %s: %w", key, err)
	} else if wait {
		// Acting before the cache shows them would start a second pod on
		// their nodes.
		logger.V(2).Info("Waiting for the pods marked for adoption to show")
		c.enqueueAfter(ds, time.Second)
		return nil
	}
	// Adopted pods are expected like creations on their nodes, so adopt
	// before the expectations are read. Releases go on the view below.
	memo := c.state.podMemo(key, sel)
	if err := c.adoptPods(ctx, ds, sel, adopt); err != nil {
		return fmt.Errorf("adopt pods of DaemonSet %s: %w", key, err)
	}
	// Expectations first, pods second, as upstream: the informer indexes a
	// pod before its handler marks the creation observed, so pods read after
	// a satisfied check include every pod that satisfied it. Read the other
	// way round, a creation observed in between would leave its pod out of
	// the view and the sync would create a second pod on that node.
	satisfied, creating := c.state.creating(key)
	v, err := c.readView(ds, nodes, memo, hash)
	if err != nil {
		return err
	}
	if err := c.releasePods(ctx, v); err != nil {
		return fmt.Errorf("release pods of DaemonSet %s: %w", key, err)
	}
	v.Decide(cur, old, satisfied)
	c.state.synced(key, c.clock.Since(start), len(v.Nodes)+len(v.Pods))
	// Before anything acts: this sync's manage step deletes the stuck pods
	// once the marker is off.
	c.fallBackFromMarker(ctx, v)

	// The sync that finds a stop reports it, acting or not: the status it
	// writes records the stop, and the next sync finds it recorded.
	c.reportStop(ctx, v)
	if !v.Acts {
		// Earlier creations or deletions are not in the cache yet: acting
		// now could double them. Report what is known, without claiming the
		// current generation was acted on.
		creates, deletes, updates := c.state.pending(key)
		logger.V(4).Info("Waiting for earlier pod changes to show", "creates", creates, "deletes", deletes, "updates", updates)
		if d, waits := c.state.expiresIn(key); waits {
			// A change that never shows (a write that changed nothing, a
			// watch event lost for good) is given up at the TTL; without a
			// sync then, the set would wait for its next event, which may
			// never come.
			c.enqueueAfter(ds, max(d, 0)+time.Second)
		}
		var err error
		if v.Verdict.RollbackTo == nil {
			// A rollback waits for a sync that acts: the pods it wants
			// are another revision's.
			err = c.createOnBareNodes(ctx, v, creating)
		}
		return errors.Join(err, c.updateStatus(ctx, v))
	}

	if v.Verdict.RollbackTo != nil {
		// The set gets an earlier template; the syncs its change starts
		// roll that out. Nothing else to do on this one.
		return c.rollBack(ctx, v)
	}
	err = c.reconcile(ctx, v)
	statusErr := c.updateStatus(ctx, v)
	if err != nil && statusErr != nil {
		logger.Error(statusErr, "Failed to update status")
	}
	return errors.Join(err, statusErr)
}

// reconcile runs the manage step, then the rolling update, then the
// gate closings and openings and the revision cleanup. A strategy that does not parse
// replaces nothing; the rest still runs, and its error is returned last.
func (c *Controller) reconcile(ctx context.Context, v *plan.View) error {
	acted, err := c.manage(ctx, v)
	if err != nil {
		return err
	}
	// The rolling update must see what manage just did, as upstream: it goes
	// on only once the cache shows manage's changes, and then on pods read
	// afresh (v still shows them as before manage, and the rolling update
	// would delete again the old pods manage just deleted). If the events
	// have not come yet, they trigger the next sync, which rolls on.
	var touched map[*corev1.Pod]bool
	roll := v.Strategy.RollingUpdate()
	if roll && acted {
		if roll = c.state.satisfied(cache.MetaObjectToName(v.DS)); roll {
			pods, err := c.podsOfSet(v.DS)
			if err != nil {
				return err
			}
			v = v.Again(pods, c.clock.Now())
		}
	}
	if roll {
		if touched, err = c.rollingUpdate(ctx, v); err != nil {
			return err
		}
	}
	// Resizes go only when every pod change asked for so far shows:
	// neither manage nor the rolling update sent one this sync (a pod being
	// replaced gets its size by being made anew), and the pods read are
	// those the budget was counted on.
	if c.state.satisfied(cache.MetaObjectToName(v.DS)) {
		if err := c.resize(ctx, v); err != nil {
			return fmt.Errorf("resize pods: %w", err)
		}
	}
	if err := c.closeLateGates(ctx, v, touched); err != nil {
		return fmt.Errorf("close in-place readiness gates: %w", err)
	}
	if err := c.openGates(ctx, v, touched); err != nil {
		return fmt.Errorf("open in-place readiness gates: %w", err)
	}
	if err := c.removeStartGates(ctx, v); err != nil {
		return fmt.Errorf("remove start-after gates: %w", err)
	}
	if err := c.cleanupHistory(ctx, v.DS, v.Old, v.AllPods); err != nil {
		return fmt.Errorf("clean up revisions: %w", err)
	}
	// A strategy that does not parse replaced nothing: fail the sync, so
	// it is logged and retried with backoff.
	return v.Policy.Invalid
}

// readView reads the set's pods from the cache and builds the view on
// their facts, derived once per pod object (plan.PodMemo).
func (c *Controller) readView(ds *everynodev1alpha1.DaemonSet, nodes *plan.NodeSnapshot, memo *plan.PodMemo, hash string) (*plan.View, error) {
	pods, err := c.podsOfSet(ds)
	if err != nil {
		return nil, err
	}
	return plan.NewView(ds, nodes, pods, memo, hash, c.clock.Now()), nil
}

// createOnBareNodes creates the pods of the nodes that should run the set
// and show none of its pods, and for which no creation is pending
// (creating, read before the pods): what a sync that waits for earlier pod
// changes can still do without doubling a pod.
//
// Upstream's sync does nothing while any change of the set is pending.
// During a rolling update one nearly always is (its requests queue for
// the client's tokens), so a node that joined, or whose pod was deleted
// under it, waited for the rollout's requests to show before its pod was
// even asked for. That is the wait kubernetes#121474 and #128442 describe:
// a new node useless until its daemons run, behind a long rollout.
//
// It is safe because creations are expected per node (expectations.go):
//   - a node's pending creation is in creating, read before the pods, so
//     a creation observed in between shows in the pods;
//   - a pending deletion's pod still shows on its node (being deleted, a
//     node gets no new pod without surge, plan.PlanNode), until it is gone;
//     then the node needs its replacement, and this is it;
//   - an adoption is expected like a creation.
//
// A rollback waits for a sync that acts: the pods it wants are another
// revision's.
func (c *Controller) createOnBareNodes(ctx context.Context, v *plan.View, creating map[string]struct{}) error {
	var nodes []string
	for i := range v.Nodes {
		st := &v.Nodes[i]
		if _, pending := creating[st.Name]; st.Decision.ShouldRun && len(st.Pods) == 0 && !pending {
			nodes = append(nodes, st.Name)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	klog.FromContext(ctx).V(4).Info("Creating daemon pods on nodes without one while earlier changes show", "daemonset", klog.KObj(v.DS), "count", len(nodes))
	return c.syncNodes(ctx, v.DS, nil, nodes, v.Hash)
}
