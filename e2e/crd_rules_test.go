package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

var setsGVR = everynodev1alpha1.SchemeGroupVersion.WithResource("daemonsets")

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cfg)
}

// fluentdManifest is examples/fluentd-elasticsearch.yaml as kubectl sends
// it, under another name so it cannot clash with the seed scenario's set.
func fluentdManifest(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "fluentd-elasticsearch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	return u
}

// invalidVariants are the invalid variants of the fluentd example,
// each with the one error the API server must give: the CRD's messages,
// which webhook/crd_test.go holds equal to the webhook's.
var invalidVariants = map[string]struct {
	change func(spec map[string]any)
	want   string
}{
	"selector does not match template labels": {
		change: func(spec map[string]any) {
			spec["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{"name": "other"}}
		},
		want: "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`",
	},
	"restartPolicy Never": {
		change: func(spec map[string]any) {
			spec["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] = "Never"
		},
		want: `spec.template.spec.restartPolicy: Invalid value: "Never": supported values: "Always"`,
	},
	"empty selector": {
		change: func(spec map[string]any) { spec["selector"] = map[string]any{} },
		want:   "spec.selector: Invalid value: empty selector is invalid for daemonset",
	},
	"maxUnavailable and maxSurge both 0": {
		change: func(spec map[string]any) {
			spec["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": int64(0), "maxSurge": int64(0)}}
		},
		want: "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
	},
}

// causes renders an Invalid error's causes as "field: message", sorted.
func causes(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want Invalid", err)
	}
	var out []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	sort.Strings(out)
	return out
}

// With everynode stopped, the upstream docs' fluentd DaemonSet applied in
// kube-system (which the webhooks skip) is stored with the apps/v1
// defaults, from the CRD's schema alone, and its invalid variants are
// refused there by the CRD's rules; after everynode is back they are
// refused with the same messages in a namespace the webhooks serve.
func TestRulesHoldWithoutWebhooks(t *testing.T) {
	dyn := dynamicClient(t)
	const ns = "kube-system"
	step(t, harness.StopEverynode())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			step(t, harness.StartEverynode(bg))
		}
	})

	name := "fluentd-rules-" + randSuffix()
	sets := dyn.Resource(setsGVR).Namespace(ns)
	created, err := sets.Create(ctx(t), fluentdManifest(t, name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the fluentd example was refused in %s with everynode stopped: %v", ns, err)
	}
	// Deleted before everynode is back (cleanups run last first), so the
	// controller never makes its pods.
	t.Cleanup(func() { _ = sets.Delete(ctx(t), name, metav1.DeleteOptions{}) })

	// The reference: what kube-apiserver stores for the same manifest as
	// an apps/v1 DaemonSet (a dry run: nothing is kept).
	asApps := fluentdManifest(t, name)
	asApps.SetAPIVersion(appsv1.SchemeGroupVersion.String())
	apps, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("daemonsets")).Namespace(ns).
		Create(ctx(t), asApps, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	got, want := specOf(t, created), specOf(t, apps)
	// imagePullPolicy follows the image's tag: no schema default can, so
	// only the webhook (or, for the pods, the API server) sets it.
	for _, c := range want["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
		delete(c.(map[string]any), "imagePullPolicy")
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("stored spec differs from apps/v1's (imagePullPolicy aside):\neverynode.io: %s\napps/v1:      %s", g, w)
	} else {
		b, _ := json.Marshal(got)
		t.Logf("stored as apps/v1 stores it: %s", b)
	}

	refused := func(t *testing.T, ns string) map[string][]string {
		out := map[string][]string{}
		for variant, tc := range invalidVariants {
			u := fluentdManifest(t, "bad-"+randSuffix())
			u.SetNamespace(ns)
			tc.change(u.Object["spec"].(map[string]any))
			_, err := dyn.Resource(setsGVR).Namespace(ns).Create(ctx(t), u, metav1.CreateOptions{})
			if err == nil {
				_ = dyn.Resource(setsGVR).Namespace(ns).Delete(ctx(t), u.GetName(), metav1.DeleteOptions{})
				t.Errorf("%s: accepted in %s", variant, ns)
				continue
			}
			out[variant] = causes(t, err)
		}
		return out
	}
	inKubeSystem := refused(t, ns)
	for variant, tc := range invalidVariants {
		if got := inKubeSystem[variant]; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s in %s: causes %q, want [%q]", variant, ns, got, tc.want)
		}
	}

	step(t, harness.StartEverynode(bg))
	restarted = true
	elsewhere := refused(t, newNamespace(t))
	for variant := range invalidVariants {
		if !reflect.DeepEqual(inKubeSystem[variant], elsewhere[variant]) {
			t.Errorf("%s: %q in %s, %q in a namespace the webhooks serve", variant, inKubeSystem[variant], ns, elsewhere[variant])
		}
	}
}

func specOf(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil || !ok {
		t.Fatalf("no spec: %v", err)
	}
	return spec
}

// A set with nodeOverrides in kube-system is stored (the CRD validates
// it), and the controller says its overrides were not checked there: the
// WebhooksSkipped condition and a Warning event.
func TestWebhooksSkippedWarning(t *testing.T) {
	const ns = "kube-system"
	ds := simpleSet(ns, "overrides-"+randSuffix(), map[string]string{scenarioLabel: "none"})
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{},
		Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","image":"agent:arm64"}]}}`)},
	}}
	createSet(t, ds)
	t.Cleanup(func() {
		_ = everynode.EverynodeV1alpha1().DaemonSets(ns).Delete(ctx(t), ds.Name, metav1.DeleteOptions{})
	})
	eventually(t, settle, "the WebhooksSkipped condition", func() (bool, string, error) {
		c := meta.FindStatusCondition(getSet(t, ns, ds.Name).Status.Conditions, everynodev1alpha1.ConditionWebhooksSkipped)
		if c == nil {
			return false, "no condition", nil
		}
		return c.Status == metav1.ConditionTrue && c.Reason == everynodev1alpha1.ReasonNodeOverridesUnchecked &&
			strings.Contains(c.Message, "not checked when the set was stored"), c.Reason + ": " + c.Message, nil
	})
	eventually(t, settle, "a Warning event "+everynodev1alpha1.ReasonNodeOverridesUnchecked, func() (bool, string, error) {
		events, err := kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + ds.Name})
		if err != nil {
			return false, "", err
		}
		for _, e := range events.Items {
			if e.Type == "Warning" && e.Reason == everynodev1alpha1.ReasonNodeOverridesUnchecked {
				return true, e.Message, nil
			}
		}
		return false, "", nil
	})
}
