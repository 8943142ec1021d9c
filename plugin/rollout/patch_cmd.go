package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// patchOptions runs restart, pause and resume: each computes a merge patch
// per set (nil when there is nothing to do) and sends it.
type patchOptions struct {
	f            Factory
	streams      genericiooptions.IOStreams
	target       targetFlags
	fieldManager string
	printFlags   *genericclioptions.PrintFlags
	// patch returns the patch for a set, or nil with the message to print
	// when the set is already where the command would bring it.
	patch func(ds *everynodev1alpha1.DaemonSet) (patch []byte, unchanged string, err error)
	// done is the message printed after a patch ("paused").
	done string
}

func (o *patchOptions) command(use, short, long, example string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   use + " (NAME | daemonset/NAME | -l SELECTOR) [flags]",
		DisableFlagsInUseLine: true,
		Short:                 short,
		Long:                  long,
		Example:               example,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.target.validate(args); err != nil {
				return err
			}
			return o.run(cmd.Context(), args)
		},
	}
	o.target.addFlags(cmd)
	cmd.Flags().StringVar(&o.fieldManager, "field-manager", fieldManager, "Name of the manager used to track field ownership.")
	o.printFlags.AddFlags(cmd)
	return cmd
}

func (o *patchOptions) run(ctx context.Context, args []string) error {
	client, err := o.f.EverynodeClient()
	if err != nil {
		return err
	}
	sets, err := o.target.resolve(ctx, o.f, client, args, o.streams.ErrOut)
	if err != nil {
		return err
	}
	// As kubectl: go on with the other sets when one fails, report all.
	var errs []error
	for _, ds := range sets {
		patch, unchanged, err := o.patch(ds)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", resource, ds.Name, err))
			continue
		}
		obj, operation := ds, unchanged
		if patch != nil {
			obj, err = client.EverynodeV1alpha1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: o.fieldManager})
			if err != nil {
				errs = append(errs, fmt.Errorf("patch %s %q: %w", resource, ds.Name, err))
				continue
			}
			operation = o.done
		}
		printer, err := toPrinter(o.printFlags, operation, dryRunNone)
		if err != nil {
			return err
		}
		if err := printer.PrintObj(obj, o.streams.Out); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

func newCmdRestart(f Factory, streams genericiooptions.IOStreams, now func() time.Time) *cobra.Command {
	o := &patchOptions{f: f, streams: streams, printFlags: newPrintFlags("restarted"), done: "restarted",
		patch: func(ds *everynodev1alpha1.DaemonSet) ([]byte, string, error) {
			p, err := restartPatch(ds, now())
			return p, "", err
		},
	}
	return o.command("restart", "Restart a daemon set",
		`Restart an everynode DaemonSet: its pod template gets the annotation
kubectl.kubernetes.io/restartedAt with the current time, so the controller
replaces every pod under the set's update strategy, as kubectl rollout restart
does for built-in kinds.`,
		`  # Restart the everynode DaemonSet fluentd
  kubectl everynode rollout restart fluentd

  # Restart every everynode DaemonSet labelled tier=node in all namespaces
  kubectl everynode rollout restart -l tier=node -A`)
}

func newCmdPause(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &patchOptions{f: f, streams: streams, printFlags: newPrintFlags("paused"), done: "paused",
		patch: func(ds *everynodev1alpha1.DaemonSet) ([]byte, string, error) {
			p, err := pausePatch(ds, true)
			return p, "already paused", err
		},
	}
	return o.command("pause", "Mark the provided daemon set as paused",
		`Pause the rollout of an everynode DaemonSet: it sets
spec.updateStrategy.rollingUpdate.paused, so the controller stops replacing
pods of older revisions (nodes without a pod still get one of the newest).
Changes to the template keep being recorded; resume to roll them out. A set
with updateStrategy OnDelete cannot be paused.`,
		`  # Pause the rollout of fluentd, to look at the first updated nodes
  kubectl everynode rollout pause fluentd`)
}

func newCmdResume(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &patchOptions{f: f, streams: streams, printFlags: newPrintFlags("resumed"), done: "resumed",
		patch: func(ds *everynodev1alpha1.DaemonSet) ([]byte, string, error) {
			p, err := pausePatch(ds, false)
			return p, "already resumed", err
		},
	}
	return o.command("resume", "Resume a paused daemon set",
		`Resume the paused rollout of an everynode DaemonSet: it clears
spec.updateStrategy.rollingUpdate.paused and the controller goes on replacing
pods. A rollout that paused itself because its updated pods failed
(updateStrategy.rollingUpdate.onFailure, status.rolloutFailure) goes on too:
resume sets the annotation everynode.io/resume-revision to the failed
revision's hash, and that revision is not stopped again.`,
		`  # Resume the paused rollout of fluentd
  kubectl everynode rollout resume fluentd`)
}
