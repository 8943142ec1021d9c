package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
)

// resource is how kubectl spells the resource in messages and errors
// (daemonsets.everynode.io "x" not found).
const resource = "daemonsets.everynode.io"

// resourceTypes are the spellings accepted before a slash in TYPE/NAME, so
// that `daemonset/x` typed out of kubectl habit works. They all mean the
// everynode DaemonSet: the plugin knows no other kind.
var resourceTypes = map[string]bool{
	"daemonset": true, "daemonsets": true, "ds": true, "eds": true,
	"daemonset.everynode.io": true, "daemonsets.everynode.io": true,
	"daemonset.v1alpha1.everynode.io": true, "daemonsets.v1alpha1.everynode.io": true,
}

// parseName returns the set name of a NAME or TYPE/NAME argument.
func parseName(arg string) (string, error) {
	typ, name, found := strings.Cut(arg, "/")
	if !found {
		if arg == "" {
			return "", errors.New("empty resource name")
		}
		return arg, nil
	}
	if !resourceTypes[strings.ToLower(typ)] {
		return "", fmt.Errorf("resource type %q is not supported: kubectl everynode rollout works on %s (give NAME or daemonset/NAME); use kubectl rollout for built-in kinds", typ, resource)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("invalid resource name %q", arg)
	}
	return name, nil
}

// targetFlags select the sets a command works on: NAME arguments in the
// namespace, or a label selector in the namespace or in all of them, as
// kubectl's resource builder does.
type targetFlags struct {
	selector      string
	allNamespaces bool
}

func (t *targetFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&t.selector, "selector", "l", "", "Selector (label query) to filter on, supports '=', '==', '!=', 'in', 'notin'. (e.g. -l key1=value1,key2=value2). Instead of NAME.")
	cmd.Flags().BoolVarP(&t.allNamespaces, "all-namespaces", "A", false, "With --selector, act on matching daemon sets in all namespaces.")
}

// validate checks the arguments before any client is built.
func (t *targetFlags) validate(args []string) error {
	switch {
	case len(args) == 0 && t.selector == "":
		return errors.New("required resource not specified: give NAME (or daemonset/NAME) or --selector")
	case len(args) > 0 && t.selector != "":
		return errors.New("give either NAME arguments or --selector, not both")
	case len(args) > 0 && t.allNamespaces:
		return errors.New("a resource cannot be retrieved by name across all namespaces")
	}
	for _, a := range args {
		if _, err := parseName(a); err != nil {
			return err
		}
	}
	if t.selector != "" {
		if _, err := labels.Parse(t.selector); err != nil {
			return fmt.Errorf("invalid selector %q: %w", t.selector, err)
		}
	}
	return nil
}

// resolve fetches the sets the command should act on. By name, the first
// missing set is an error (kubectl's NotFound); by selector, no match prints
// kubectl's "No resources found" on errOut and returns none.
func (t *targetFlags) resolve(ctx context.Context, f Factory, client versioned.Interface, args []string, errOut io.Writer) ([]*everynodev1alpha1.DaemonSet, error) {
	ns := metav1.NamespaceAll
	if !t.allNamespaces {
		var err error
		if ns, err = f.Namespace(); err != nil {
			return nil, fmt.Errorf("namespace: %w", err)
		}
	}
	if t.selector == "" {
		sets := make([]*everynodev1alpha1.DaemonSet, 0, len(args))
		for _, a := range args {
			name, err := parseName(a)
			if err != nil {
				return nil, err
			}
			ds, err := client.EverynodeV1alpha1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			sets = append(sets, ds)
		}
		return sets, nil
	}
	list, err := client.EverynodeV1alpha1().DaemonSets(ns).List(ctx, metav1.ListOptions{LabelSelector: t.selector})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", resource, err)
	}
	sets := make([]*everynodev1alpha1.DaemonSet, 0, len(list.Items))
	for i := range list.Items {
		sets = append(sets, &list.Items[i])
	}
	sort.Slice(sets, func(i, j int) bool {
		if sets[i].Namespace != sets[j].Namespace {
			return sets[i].Namespace < sets[j].Namespace
		}
		return sets[i].Name < sets[j].Name
	})
	if len(sets) == 0 {
		if t.allNamespaces {
			fmt.Fprintln(errOut, "No resources found")
		} else {
			fmt.Fprintf(errOut, "No resources found in %s namespace.\n", ns)
		}
	}
	return sets, nil
}
