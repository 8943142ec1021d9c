package migrate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// Factory gives the command its clients and namespace.
type Factory interface {
	Namespace() (string, error)
	EverynodeClient() (versioned.Interface, error)
	AppsClient() (appsv1client.AppsV1Interface, error)
}

type options struct {
	f       Factory
	out     io.Writer
	to      string
	dryRun  bool
	timeout time.Duration
	backup  string
	poll    time.Duration
}

// NewCommand returns `kubectl everynode migrate`.
func NewCommand(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{f: f, out: streams.Out, to: string(ToEverynode), timeout: 2 * time.Minute, poll: time.Second}
	cmd := &cobra.Command{
		Use:   "migrate NAME [--to everynode|apps]",
		Short: "Move a DaemonSet between apps/v1 and everynode.io without restarting a pod",
		Long: `Move the DaemonSet NAME from apps/v1 to everynode.io/v1alpha1 (--to everynode,
the default), or back (--to apps), without restarting a pod.

The old object is deleted with --cascade=orphan, so its pods and revisions stay;
the new one is created with the same selector, template and strategy; its
controller adopts the pods, and since their revision hash is the new set's
too, no rolling update starts. Before anything is deleted the command checks,
with a server-side dry run of the new object, that the hash will match, and
that the set is at rest (no rollout under way). The old object is saved to
--backup-dir first. If a step fails the pods keep running, unowned, and the
command prints how to finish or undo.

Back to apps/v1 needs kube-controller-manager's DaemonSet controller (or
everynode --takeover), and a set that uses nothing apps/v1 lacks.`,
		Example: `  kubectl everynode migrate fluentd-elasticsearch -n kube-system --dry-run
  kubectl everynode migrate fluentd-elasticsearch -n kube-system
  kubectl everynode migrate fluentd-elasticsearch -n kube-system --to apps`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.to, "to", o.to, `"everynode" (from apps/v1) or "apps" (back to apps/v1)`)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", o.dryRun, "Check and print what would happen; change nothing")
	cmd.Flags().DurationVar(&o.timeout, "timeout", o.timeout, "How long to wait for the old object to go and the new one to own every pod")
	cmd.Flags().StringVar(&o.backup, "backup-dir", os.TempDir(), "Where the old object is saved before it is deleted")
	return cmd
}

// step is one side of a migration, whatever the direction.
type step struct {
	kind, otherKind string
	// podHash is the revision hash the pods carry.
	podHash string
	// desired is the number of pods to keep.
	desired int32
	// old is the object to save; newObj the one to create.
	old, newObj interface{}
	// deleteOld orphans the old object; getOld reports NotFound once gone.
	deleteOld func(context.Context) error
	getOld    func(context.Context) error
	// createNew creates the new object (dryRun: server-side dry run) and
	// returns it as the everynode type, for the hash check.
	createNew func(context.Context, bool) (*everynodev1alpha1.DaemonSet, error)
	// adopted reports progress of the new object: done when it owns every
	// desired pod, all updated and available.
	adopted func(context.Context) (bool, string, error)
	// prepare runs after the old object is gone, before the new one is
	// made.
	prepare func(context.Context) error
}

func (o *options) run(ctx context.Context, name string) error {
	ns, err := o.f.Namespace()
	if err != nil {
		return err
	}
	apps, err := o.f.AppsClient()
	if err != nil {
		return err
	}
	en, err := o.f.EverynodeClient()
	if err != nil {
		return err
	}
	var s *step
	switch Direction(o.to) {
	case ToEverynode:
		s, err = toEverynode(ctx, apps, en, ns, name)
	case ToApps:
		s, err = toApps(ctx, apps, en, ns, name)
	default:
		return fmt.Errorf(`--to must be "everynode" or "apps", not %q`, o.to)
	}
	if err != nil {
		return err
	}
	stored, err := s.createNew(ctx, true)
	if err != nil {
		return fmt.Errorf("the new %s DaemonSet %s/%s would be refused (server-side dry run): %w", s.otherKind, ns, name, err)
	}
	if err := SameHash(s.podHash, stored); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "%s DaemonSet %s/%s: %d pods of revision %s; the %s DaemonSet will have the same revision hash, so no pod is replaced.\n",
		s.kind, ns, name, s.desired, s.podHash, s.otherKind)
	if o.dryRun {
		fmt.Fprintf(o.out, "Would: save %s DaemonSet %s/%s to %s; delete it with --cascade=orphan; create the %s DaemonSet; wait until it owns the pods. (dry run: nothing changed)\n",
			s.kind, ns, name, o.backupPath(s.kind, ns, name), s.otherKind)
		return nil
	}

	oldPath, err := o.save(s.old, s.kind, ns, name)
	if err != nil {
		return err
	}
	newPath, err := o.save(s.newObj, s.otherKind, ns, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "Saved the %s DaemonSet to %s, and the %s one to be created to %s.\n", s.kind, oldPath, s.otherKind, newPath)
	undo := fmt.Sprintf("to undo: kubectl create -f %s (its controller adopts the pods back)", oldPath)
	finish := fmt.Sprintf("to finish: kubectl create -f %s", newPath)
	if err := s.deleteOld(ctx); err != nil {
		return fmt.Errorf("delete the %s DaemonSet with --cascade=orphan: %w; nothing else was changed", s.kind, err)
	}
	if err := o.wait(ctx, func(ctx context.Context) (bool, string, error) {
		err := s.getOld(ctx)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "the garbage collector is orphaning its pods", err
	}); err != nil {
		return fmt.Errorf("the %s DaemonSet is not gone: %w. Its pods keep running. Once it is gone, %s; or %s", s.kind, err, finish, undo)
	}
	fmt.Fprintf(o.out, "Deleted the %s DaemonSet; its pods run on, orphaned.\n", s.kind)
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return fmt.Errorf("%w. The pods keep running, orphaned; %s; or %s", err, finish, undo)
		}
	}
	if _, err := s.createNew(ctx, false); err != nil {
		return fmt.Errorf("create the %s DaemonSet: %w. The pods keep running, orphaned; %s; or %s", s.otherKind, err, finish, undo)
	}
	fmt.Fprintf(o.out, "Created the %s DaemonSet.\n", s.otherKind)
	if err := o.wait(ctx, s.adopted); err != nil {
		return fmt.Errorf("the %s DaemonSet does not own every pod yet: %w. Nothing is lost: its controller goes on; check kubectl describe", s.otherKind, err)
	}
	fmt.Fprintf(o.out, "The %s DaemonSet %s/%s owns all %d pods, updated and available; none was replaced.\n", s.otherKind, ns, name, s.desired)
	return nil
}

func (o *options) backupPath(kind, ns, name string) string {
	short := map[string]string{"apps/v1": "apps", "everynode.io": "everynode"}[kind]
	return filepath.Join(o.backup, fmt.Sprintf("daemonset-%s-%s-%s.yaml", short, ns, name))
}

// save writes obj, without status and server-set metadata, so that
// `kubectl create -f` makes it.
func (o *options) save(obj interface{}, kind, ns, name string) (string, error) {
	switch c := obj.(type) {
	case *appsv1.DaemonSet:
		c = c.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
		c.ObjectMeta = keptMetadata(c.ObjectMeta)
		c.Status = appsv1.DaemonSetStatus{}
		obj = c
	case *everynodev1alpha1.DaemonSet:
		c = c.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: everynodev1alpha1.SchemeGroupVersion.String(), Kind: "DaemonSet"}
		c.ObjectMeta = metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations}
		c.Status = everynodev1alpha1.DaemonSetStatus{}
		obj = c
	}
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	path := o.backupPath(kind, ns, name)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return "", fmt.Errorf("save the %s DaemonSet before deleting anything: %w; nothing was changed", kind, err)
	}
	return path, nil
}

// wait polls cond until it holds, printing progress when it changes.
func (o *options) wait(ctx context.Context, cond func(context.Context) (bool, string, error)) error {
	last := ""
	return wait.PollUntilContextTimeout(ctx, o.poll, o.timeout, true, func(ctx context.Context) (bool, error) {
		done, progress, err := cond(ctx)
		if err != nil || done {
			return done, err
		}
		if progress != last {
			fmt.Fprintf(o.out, "  waiting: %s\n", progress)
			last = progress
		}
		return false, nil
	})
}

func toEverynode(ctx context.Context, apps appsv1client.AppsV1Interface, en versioned.Interface, ns, name string) (*step, error) {
	old, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the apps/v1 DaemonSet: %w", err)
	}
	if _, err := en.EverynodeV1alpha1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil, fmt.Errorf("an everynode DaemonSet %s/%s exists already: delete one of the two first", ns, name)
	}
	if why := AtRest(old.Generation, old.Status); why != "" {
		return nil, fmt.Errorf("apps/v1 DaemonSet %s/%s is not at rest: %s; migrate once its rollout is done", ns, name, why)
	}
	want := EverynodeFromApps(old)
	sets := en.EverynodeV1alpha1().DaemonSets(ns)
	return &step{
		kind: "apps/v1", otherKind: "everynode.io",
		podHash: revision.Hash(&old.Spec.Template, nil, old.Status.CollisionCount),
		desired: old.Status.DesiredNumberScheduled,
		old:     old, newObj: want,
		deleteOld: func(ctx context.Context) error {
			return apps.DaemonSets(ns).Delete(ctx, name, orphanFrom(old.UID))
		},
		getOld: func(ctx context.Context) error {
			_, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		createNew: func(ctx context.Context, dryRun bool) (*everynodev1alpha1.DaemonSet, error) {
			return sets.Create(ctx, want.DeepCopy(), createOptions(dryRun))
		},
		adopted: func(ctx context.Context) (bool, string, error) {
			ds, err := sets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			st := placement.AppsStatus(&ds.Status)
			return adoptedBy(ds.Generation, st, old.Status.DesiredNumberScheduled)
		},
	}, nil
}

func toApps(ctx context.Context, apps appsv1client.AppsV1Interface, en versioned.Interface, ns, name string) (*step, error) {
	sets := en.EverynodeV1alpha1().DaemonSets(ns)
	old, err := sets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the everynode DaemonSet: %w", err)
	}
	if _, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil, fmt.Errorf("an apps/v1 DaemonSet %s/%s exists already: delete one of the two first", ns, name)
	}
	if why := AtRest(old.Generation, placement.AppsStatus(&old.Status)); why != "" {
		return nil, fmt.Errorf("everynode DaemonSet %s/%s is not at rest: %s; migrate once its rollout is done", ns, name, why)
	}
	want, err := AppsFromEverynode(old)
	if err != nil {
		return nil, err
	}
	hash := revision.HashOf(old)
	return &step{
		kind: "everynode.io", otherKind: "apps/v1",
		podHash: hash, desired: old.Status.DesiredNumberScheduled,
		old: old, newObj: want,
		deleteOld: func(ctx context.Context) error { return sets.Delete(ctx, name, orphanFrom(old.UID)) },
		getOld:    func(ctx context.Context) error { _, err := sets.Get(ctx, name, metav1.GetOptions{}); return err },
		// kube-controller-manager compares a revision's data with its own
		// format byte for byte: the revision everynode wrote under the
		// same name would be a collision to it, and a raised
		// collisionCount a new hash for every pod. So that one goes; it
		// writes its own, with the same name and hash.
		prepare: func(ctx context.Context) error {
			err := apps.ControllerRevisions(ns).Delete(ctx, revision.Name(name, hash), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete everynode's revision %s, which kube-controller-manager would take for a collision: %w", revision.Name(name, hash), err)
			}
			return nil
		},
		createNew: func(ctx context.Context, dryRun bool) (*everynodev1alpha1.DaemonSet, error) {
			created, err := apps.DaemonSets(ns).Create(ctx, want.DeepCopy(), createOptions(dryRun))
			if err != nil {
				return nil, err
			}
			return placement.FromApps(created), nil
		},
		adopted: func(ctx context.Context) (bool, string, error) {
			ds, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return adoptedBy(ds.Generation, ds.Status, old.Status.DesiredNumberScheduled)
		},
	}, nil
}

// adoptedBy reports whether the new set's status shows every pod it should
// run as its own, updated and available.
func adoptedBy(generation int64, st appsv1.DaemonSetStatus, desired int32) (bool, string, error) {
	done := st.ObservedGeneration >= generation && st.DesiredNumberScheduled == desired &&
		st.CurrentNumberScheduled == desired && st.UpdatedNumberScheduled == desired && st.NumberAvailable == desired
	return done, fmt.Sprintf("the new DaemonSet has %d of %d pods, %d updated, %d available", st.CurrentNumberScheduled, desired, st.UpdatedNumberScheduled, st.NumberAvailable), nil
}

// orphanFrom deletes with --cascade=orphan, and only the object with uid.
func orphanFrom(uid types.UID) metav1.DeleteOptions {
	orphan := metav1.DeletePropagationOrphan
	return metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &uid}}
}

func createOptions(dryRun bool) metav1.CreateOptions {
	if dryRun {
		return metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return metav1.CreateOptions{}
}
