package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
)

// Factory gives the command its clients and namespace (the plugin's
// kubeconfig handling; fakes in tests).
type Factory interface {
	Namespace() (string, error)
	EverynodeClient() (versioned.Interface, error)
	CoreClient() (corev1client.CoreV1Interface, error)
	AppsClient() (appsv1client.AppsV1Interface, error)
}

type options struct {
	f       Factory
	streams genericiooptions.IOStreams
	node    string
	output  string
}

// NewCommand returns `explain`.
func NewCommand(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{f: f, streams: streams}
	cmd := &cobra.Command{
		Use:                   "explain (NAME | daemonset/NAME) [--node NODE] [-o wide|json]",
		DisableFlagsInUseLine: true,
		Short:                 "Explain why nodes run, or do not run, a DaemonSet's pod",
		Long: `Explain, for every node (or one), whether an everynode DaemonSet should run
there and why not: the untolerated taint, the nodeSelector label that differs,
the required node affinity term that fails. For a node that should run a pod
but has no ready one: the pod's phase, its container states, the scheduler's
last FailedScheduling message, what holds it on an old revision, and the
dependency (spec.startAfter) whose pod on the node it waits for.

Eligibility is computed with the controller's own functions (package
placement), so the answer is what everynode does. The summary (nodes per
reason) comes first; then the nodes without a ready pod (-o wide: every
node; -o json: everything, for scripts).`,
		Example: `  # Why do some nodes have no fluentd pod?
  kubectl everynode explain fluentd -n logging

  # One node
  kubectl everynode explain fluentd --node worker-7`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case "", "wide", "json":
			default:
				return fmt.Errorf("unknown output format %q: use wide or json", o.output)
			}
			return o.run(cmd.Context(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.node, "node", "", "Explain this node only.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide (every node) or json.")
	return cmd
}

func (o *options) run(ctx context.Context, arg string) error {
	name := arg
	if typ, n, ok := strings.Cut(arg, "/"); ok {
		if typ != "daemonset" && typ != "daemonsets" && typ != "ds" && typ != "eds" && !strings.HasSuffix(typ, "everynode.io") {
			return fmt.Errorf("%q is not an everynode DaemonSet: use NAME or daemonset/NAME", arg)
		}
		name = n
	}
	ns, err := o.f.Namespace()
	if err != nil {
		return err
	}
	en, err := o.f.EverynodeClient()
	if err != nil {
		return err
	}
	core, err := o.f.CoreClient()
	if err != nil {
		return err
	}
	ds, err := en.EverynodeV1alpha1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("daemonsets.everynode.io %q not found in namespace %q (use -n to pick the namespace)", name, ns)
	}
	if err != nil {
		return err
	}
	var nodes []corev1.Node
	if o.node != "" {
		node, err := core.Nodes().Get(ctx, o.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %q not found", o.node)
		}
		if err != nil {
			return err
		}
		nodes = []corev1.Node{*node}
	} else {
		list, err := core.Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		nodes = list.Items
	}
	podList, err := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: everynodev1alpha1.LabelDaemonPod + "=" + everynodev1alpha1.LabelDaemonPodValue})
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	for _, p := range podList.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ds.UID {
			pods = append(pods, p)
		}
	}
	events, err := core.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedScheduling").String()})
	if err != nil {
		return err
	}
	r := build(ds, nodes, pods, events.Items, time.Now())
	start, err := o.readStartInput(ctx, ds)
	if err != nil {
		return fmt.Errorf("read the dependencies of spec.startAfter: %w", err)
	}
	addStartWaits(&r, nodes, start)
	if o.output == "json" {
		enc := json.NewEncoder(o.streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printReport(o.streams.Out, &r, o.output == "wide")
	return nil
}

// printReport writes the summary, then the nodes without a ready pod (all nodes
// when wide).
func printReport(w io.Writer, r *Report, wide bool) {
	fmt.Fprintf(w, "DaemonSet %s/%s on %d %s: %d %s a ready pod", r.Namespace, r.Name, r.Nodes, plural(r.Nodes, "node", "nodes"), r.Ready, plural(r.Ready, "runs", "run"))
	without := r.Nodes - r.Ready
	if without == 0 {
		fmt.Fprintln(w, ".")
	} else {
		fmt.Fprintf(w, ", %d %s not:\n", without, plural(without, "does", "do"))
	}
	for _, rc := range r.Reasons {
		fmt.Fprintf(w, "  %d %s: %s\n", rc.Nodes, plural(rc.Nodes, "node", "nodes"), rc.Reason)
	}
	width := 0
	for _, d := range r.Details {
		width = max(width, len(d.Node))
	}
	header := false
	for _, d := range r.Details {
		if !wide && (d.PodReady || d.Reason == "") {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			header = true
		}
		lines := nodeLines(&d)
		fmt.Fprintf(w, "%-*s  %s\n", width, d.Node, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%-*s    %s\n", width, "", l)
		}
	}
}

// nodeLines is one node's explanation, first line first.
func nodeLines(d *NodeReport) []string {
	var lines []string
	switch {
	case !d.ShouldRun:
		first := "should not run"
		if d.ShouldContinueRunning {
			first = "gets no new pod (a running one may stay)"
		}
		lines = append(lines, first+": "+strings.Join(d.Why, "; "))
	case d.Pod == "":
		lines = append(lines, "should run: no pod yet")
	default:
		lines = append(lines, "should run")
	}
	if d.Pod != "" {
		state := "not ready"
		if d.PodReady {
			state = "ready"
		}
		rev := "old revision"
		if d.Updated {
			rev = "updated"
		}
		lines = append(lines, fmt.Sprintf("pod %s: %s, %s, %s", d.Pod, d.Phase, state, rev))
	}
	lines = append(lines, d.Containers...)
	if d.Scheduler != "" {
		lines = append(lines, "scheduler: "+d.Scheduler)
	}
	if d.Size != "" {
		line := "size: " + d.Size
		if d.SizeState != "" {
			line += " (" + d.SizeState + ")"
		}
		lines = append(lines, line)
	}
	if d.Lifecycle != "" {
		lines = append(lines, fmt.Sprintf("lifecycle: %s (%s): the rolling update skips this node", d.Lifecycle, d.LifecycleWhy))
	}
	for _, w := range d.StartWaits {
		lines = append(lines, "waits for "+w)
	}
	if d.Update != "" {
		lines = append(lines, d.Update)
	}
	for _, n := range d.Notes {
		lines = append(lines, "note: "+n)
	}
	return lines
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
