package rollout

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/util/retry"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	"everynode.io/everynode/placement/revision"
)

// warningApplyManaged is kubectl's warning for a set managed with apply.
const warningApplyManaged = "Warning: resource %s/%s was previously managed with 'kubectl apply'. " +
	"Rolling back will not update the %s annotation, which may cause unexpected behavior on future 'kubectl apply' operations. " +
	"Consider using 'kubectl apply' with your previous configuration file instead.\n"

type undoOptions struct {
	f            Factory
	streams      genericiooptions.IOStreams
	target       targetFlags
	toRevision   int64
	dryRun       string
	fieldManager string
	printFlags   *genericclioptions.PrintFlags
}

func newCmdUndo(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &undoOptions{f: f, streams: streams, printFlags: newPrintFlags("rolled back")}
	cmd := &cobra.Command{
		Use:                   "undo (NAME | daemonset/NAME | -l SELECTOR) [flags]",
		DisableFlagsInUseLine: true,
		Short:                 "Undo a previous rollout",
		Long: `Roll back an everynode DaemonSet to a previous revision: its pod template and
node overrides are restored from the ControllerRevision (by default the
previous one, i.e. the second highest revision number), and the controller
then rolls the set out again. The set's kubernetes.io/change-cause is set to
that of the revision, so the history stays truthful.`,
		Example: `  # Roll back to the previous revision
  kubectl everynode rollout undo fluentd

  # Roll back to revision 1
  kubectl everynode rollout undo daemonset/fluentd --to-revision=1

  # Show what revision 1 would restore, without changing anything
  kubectl everynode rollout undo fluentd --to-revision=1 --dry-run=client`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.target.validate(args); err != nil {
				return err
			}
			if o.toRevision < 0 {
				return fmt.Errorf("--to-revision must not be negative: %v", o.toRevision)
			}
			dryRun, err := parseDryRun(o.dryRun)
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), args, dryRun)
		},
	}
	o.target.addFlags(cmd)
	cmd.Flags().Int64Var(&o.toRevision, "to-revision", 0, "The revision to rollback to. Default to 0 (last revision).")
	cmd.Flags().StringVar(&o.fieldManager, "field-manager", fieldManager, "Name of the manager used to track field ownership.")
	addDryRunFlag(cmd, &o.dryRun)
	o.printFlags.AddFlags(cmd)
	return cmd
}

func (o *undoOptions) run(ctx context.Context, args []string, dryRun dryRunStrategy) error {
	client, err := o.f.EverynodeClient()
	if err != nil {
		return err
	}
	apps, err := o.f.AppsClient()
	if err != nil {
		return err
	}
	sets, err := o.target.resolve(ctx, o.f, client, args, o.streams.ErrOut)
	if err != nil {
		return err
	}
	var errs []error
	for _, ds := range sets {
		if err := o.undoOne(ctx, client, apps, ds, dryRun); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// undoOne rolls one set back with get, replace, update: the update carries
// the resourceVersion that was read, so a concurrent change is never
// overwritten; on a conflict it starts over from a fresh read.
func (o *undoOptions) undoOne(ctx context.Context, client versioned.Interface, apps appsv1client.AppsV1Interface, ds *everynodev1alpha1.DaemonSet, dryRun dryRunStrategy) error {
	if _, ok := ds.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		fmt.Fprintf(o.streams.ErrOut, warningApplyManaged, resource, ds.Name, corev1.LastAppliedConfigAnnotation)
	}
	sets := client.EverynodeV1alpha1().DaemonSets(ds.Namespace)
	var (
		operation string
		result    *everynodev1alpha1.DaemonSet
	)
	cur, attempt := ds, 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			var err error
			if cur, err = sets.Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		revs, err := revisionsOf(ctx, apps, cur)
		if err != nil {
			return err
		}
		rev, err := pickRevision(cur, revs, o.toRevision)
		if err != nil {
			return err
		}
		restored, err := rollbackTo(cur, rev)
		if err != nil {
			return err
		}
		switch {
		case sameRevision(cur, restored):
			operation, result = fmt.Sprintf("skipped rollback (current template already matches revision %d)", rev.Revision), cur
			return nil
		case dryRun == dryRunClient:
			operation, result = "rolled back", restored
			if !o.printFlags.OutputFlagSpecified() {
				// As kubectl: show what the rollback would restore.
				operation = "will roll back to " + describeRevision(&restored.Spec.Template, restored.Spec.NodeOverrides)
			}
			return nil
		}
		opts := metav1.UpdateOptions{FieldManager: o.fieldManager}
		if dryRun == dryRunServer {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		updated, err := sets.Update(ctx, restored, opts)
		if err != nil {
			return err
		}
		operation, result = "rolled back", updated
		return nil
	})
	if err != nil {
		return fmt.Errorf("roll back daemon set %q: %w", ds.Name, err)
	}
	printer, err := toPrinter(o.printFlags, operation, dryRun)
	if err != nil {
		return err
	}
	return printer.PrintObj(result, o.streams.Out)
}

// rollbackTo returns cur with the template and node overrides of rev, and
// with rev's change-cause (or none, if rev has none). The cause matters
// because the controller copies the set's change-cause onto the revision it
// makes current: kept as is, the restored revision would be listed with
// the cause of the change being undone. kubectl restores a Deployment's
// annotations on rollback for the same reason.
func rollbackTo(cur *everynodev1alpha1.DaemonSet, rev *appsv1.ControllerRevision) (*everynodev1alpha1.DaemonSet, error) {
	out, err := atRevision(cur, rev)
	if err != nil {
		return nil, err
	}
	if cause, ok := rev.Annotations[everynodev1alpha1.AnnotationChangeCause]; ok {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[everynodev1alpha1.AnnotationChangeCause] = cause
	} else {
		delete(out.Annotations, everynodev1alpha1.AnnotationChangeCause)
	}
	return out, nil
}

// sameRevision reports whether a and b make the same pods: equal templates
// apart from the controller-revision-hash label (as kubectl compares a
// Deployment's templates without pod-template-hash), and equal node
// overrides as JSON (their patches are raw bytes whose spacing may differ).
func sameRevision(a, b *everynodev1alpha1.DaemonSet) bool {
	ta, tb := withoutHashLabel(&a.Spec.Template), withoutHashLabel(&b.Spec.Template)
	if !apiequality.Semantic.DeepEqual(ta, tb) {
		return false
	}
	if len(a.Spec.NodeOverrides) == 0 && len(b.Spec.NodeOverrides) == 0 {
		return true
	}
	da, errA := revision.Data(&everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{NodeOverrides: a.Spec.NodeOverrides}})
	db, errB := revision.Data(&everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{NodeOverrides: b.Spec.NodeOverrides}})
	return errA == nil && errB == nil && revision.MatchData(da, db)
}

func withoutHashLabel(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	if _, ok := t.Labels[revision.HashLabel]; !ok {
		return t
	}
	out := t.DeepCopy()
	delete(out.Labels, revision.HashLabel)
	return out
}
