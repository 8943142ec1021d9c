package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
)

type statusOptions struct {
	f       Factory
	streams genericiooptions.IOStreams
	target  targetFlags
	watch   bool
	timeout time.Duration
	// withTimeout derives the context that bounds one wait; a test seam
	// so that a timeout can be tested without waiting for a clock.
	withTimeout func(context.Context, time.Duration) (context.Context, context.CancelFunc)
}

func newStatusOptions(f Factory, streams genericiooptions.IOStreams) *statusOptions {
	return &statusOptions{f: f, streams: streams, watch: true, withTimeout: watchtools.ContextWithOptionalTimeout}
}

func (o *statusOptions) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "status (NAME | daemonset/NAME | -l SELECTOR) [flags]",
		DisableFlagsInUseLine: true,
		Short:                 "Show the status of the rollout",
		Long: `Show the status of the rollout of an everynode DaemonSet.

By default it watches the set until the controller has observed its latest
spec, every node runs an updated pod and every updated pod is available, and
prints a line each time that changes, with the reason of any wait taken from
the Progressing and Available conditions (nodes NotReady, pods Pending or
crash-looping, rollout paused). Use --watch=false to print the status once.
With --timeout, it exits non-zero when the rollout has not finished in time.`,
		Example: `  # Watch the rollout of the everynode DaemonSet fluentd
  kubectl everynode rollout status fluentd

  # Fail if it has not finished within five minutes
  kubectl everynode rollout status daemonset/fluentd --timeout=5m`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.target.validate(args); err != nil {
				return err
			}
			if o.timeout < 0 {
				return fmt.Errorf("--timeout must not be negative: %v", o.timeout)
			}
			return o.run(cmd.Context(), args)
		},
	}
	o.target.addFlags(cmd)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", o.watch, "Watch the status of the rollout until it's done.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "The length of time to wait before ending watch, zero means never. Any other values should contain a corresponding time unit (e.g. 1s, 2m, 3h).")
	return cmd
}

func (o *statusOptions) run(ctx context.Context, args []string) error {
	client, err := o.f.EverynodeClient()
	if err != nil {
		return err
	}
	sets, err := o.target.resolve(ctx, o.f, client, args, o.streams.ErrOut)
	if err != nil {
		return err
	}
	for _, ds := range sets {
		if err := o.wait(ctx, client, ds); err != nil {
			return err
		}
	}
	return nil
}

// wait follows one set until its rollout is done (or once, without
// --watch). It watches the set alone, by a field selector on its name, and
// re-lists through an informer if the watch breaks, as kubectl does.
func (o *statusOptions) wait(ctx context.Context, client versioned.Interface, ds *everynodev1alpha1.DaemonSet) error {
	sets := client.EverynodeV1alpha1().DaemonSets(ds.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", ds.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return sets.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return sets.Watch(ctx, opts)
		},
	}
	key := ds.Namespace + "/" + ds.Name
	exists := func(store cache.Store) (bool, error) {
		if _, ok, err := store.GetByKey(key); err != nil || ok {
			return false, err
		}
		return true, apierrors.NewNotFound(everynodev1alpha1.Resource("daemonsets"), ds.Name)
	}

	waitCtx, cancel := o.withTimeout(ctx, o.timeout)
	defer cancel()
	var last Progress
	printed := ""
	_, err := watchtools.UntilWithSync(waitCtx, cache.ToListWatcherWithWatchListSemantics(lw, client), &everynodev1alpha1.DaemonSet{}, exists,
		func(e watch.Event) (bool, error) {
			switch e.Type {
			case watch.Added, watch.Modified:
				cur, ok := e.Object.(*everynodev1alpha1.DaemonSet)
				if !ok {
					return false, fmt.Errorf("unexpected object %T in the watch of daemon set %q", e.Object, ds.Name)
				}
				if cur.Name != ds.Name {
					// Only a server that ignores the field selector
					// sends others.
					return false, nil
				}
				p, err := StatusOf(cur)
				if err != nil {
					return false, err
				}
				last = p
				// Status updates that change nothing we show (a
				// condition's timestamp) would repeat the same lines.
				if s := p.String(); s != printed {
					fmt.Fprint(o.streams.Out, s)
					printed = s
				}
				return p.Done || !o.watch, nil
			case watch.Deleted:
				return false, fmt.Errorf("daemon set %q was deleted while waiting for its rollout to finish", ds.Name)
			default:
				return false, fmt.Errorf("unexpected watch event %s for daemon set %q", e.Type, ds.Name)
			}
		})
	if err == nil {
		return nil
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted while waiting for daemon set %q rollout to finish: %w", ds.Name, ctx.Err())
	case errors.Is(waitCtx.Err(), context.DeadlineExceeded):
		return timeoutError(ds.Name, o.timeout, last)
	}
	return err
}

// timeoutError says that the rollout did not finish in time and where it
// stood, so the log of a failed pipeline shows why.
func timeoutError(name string, timeout time.Duration, last Progress) error {
	msg := fmt.Sprintf("timed out after %v waiting for daemon set %q rollout to finish", timeout, name)
	if last.Message != "" {
		msg += ": " + strings.TrimSuffix(last.Message, "...")
		for _, w := range last.Why {
			msg += "; " + w
		}
	}
	return errors.New(msg)
}
