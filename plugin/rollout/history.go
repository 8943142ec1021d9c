package rollout

import (
	"bytes"
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

type historyOptions struct {
	f          Factory
	streams    genericiooptions.IOStreams
	target     targetFlags
	revision   int64
	printFlags *genericclioptions.PrintFlags
}

func newCmdHistory(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{f: f, streams: streams, printFlags: newPrintFlags("")}
	cmd := &cobra.Command{
		Use:                   "history (NAME | daemonset/NAME | -l SELECTOR) [flags]",
		DisableFlagsInUseLine: true,
		Short:                 "View rollout history",
		Long: `View previous rollout revisions of an everynode DaemonSet: the REVISION
numbers and the kubernetes.io/change-cause annotation each was made with.
With --revision, show the pod template (and node overrides) of that revision.
With -o, print the DaemonSet as it would be at each revision (or at --revision).`,
		Example: `  # View the rollout history of the everynode DaemonSet fluentd
  kubectl everynode rollout history fluentd

  # View the details of revision 3
  kubectl everynode rollout history fluentd --revision=3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.target.validate(args); err != nil {
				return err
			}
			if o.revision < 0 {
				return fmt.Errorf("revision must be a positive integer: %v", o.revision)
			}
			return o.run(cmd.Context(), args)
		},
	}
	o.target.addFlags(cmd)
	cmd.Flags().Int64Var(&o.revision, "revision", 0, "See the details, including the pod template, of the revision specified.")
	o.printFlags.AddFlags(cmd)
	return cmd
}

func (o *historyOptions) run(ctx context.Context, args []string) error {
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
	for _, ds := range sets {
		revs, err := revisionsOf(ctx, apps, ds)
		if err != nil {
			return err
		}
		if err := o.print(ds, revs); err != nil {
			return err
		}
	}
	return nil
}

// print writes the history of one set: objects with -o, else kubectl's
// text (the set's name, then the table or the template of --revision).
func (o *historyOptions) print(ds *everynodev1alpha1.DaemonSet, revs []*appsv1.ControllerRevision) error {
	if o.printFlags.OutputFlagSpecified() {
		printer, err := o.printFlags.ToPrinter()
		if err != nil {
			return err
		}
		if o.revision > 0 {
			rev, err := findRevision(ds, revs, o.revision)
			if err != nil {
				return err
			}
			revs = []*appsv1.ControllerRevision{rev}
		}
		for _, rev := range revs {
			obj, err := atRevision(ds, rev)
			if err != nil {
				return err
			}
			if err := printer.PrintObj(obj, o.streams.Out); err != nil {
				return err
			}
		}
		return nil
	}

	text, err := historyText(ds, revs, o.revision)
	if err != nil {
		return err
	}
	printer, err := toPrinter(o.printFlags, text, dryRunNone)
	if err != nil {
		return err
	}
	return printer.PrintObj(ds, o.streams.Out)
}

// historyText is what kubectl's printHistory returns, prefixed as kubectl
// prefixes it: "with revision #N" and the template of revision N, or the
// REVISION / CHANGE-CAUSE table sorted by revision. revs must be sorted.
func historyText(ds *everynodev1alpha1.DaemonSet, revs []*appsv1.ControllerRevision, n int64) (string, error) {
	if len(revs) == 0 && n == 0 {
		return "\nNo rollout history found.", nil
	}
	if n > 0 {
		rev, err := findRevision(ds, revs, n)
		if err != nil {
			return "", err
		}
		at, err := atRevision(ds, rev)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("with revision #%d\n%s", n, describeRevision(&at.Spec.Template, at.Spec.NodeOverrides)), nil
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "REVISION\tCHANGE-CAUSE\n")
	for _, r := range revs {
		cause := r.Annotations[everynodev1alpha1.AnnotationChangeCause]
		if cause == "" {
			cause = "<none>"
		}
		fmt.Fprintf(tw, "%d\t%s\n", r.Revision, cause)
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return "\n" + buf.String(), nil
}
