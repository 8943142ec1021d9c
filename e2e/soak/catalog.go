package soak

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Labels the soak puts on what it makes, so its watches and sets select
// exactly that.
const (
	// NodeLabel marks the soak's kwok nodes; every set selects it.
	NodeLabel = "soak.everynode.io/node"
	// PoolLabel splits the nodes into pools a, b and c (by index, round
	// robin), so that some sets run on a third of the nodes.
	PoolLabel = "soak.everynode.io/pool"
	// SetLabel is on every pod template: the set's name. The checkers
	// group pods by it, so an orphaned pod still counts with its set.
	SetLabel = "soak.everynode.io/set"
	// PlainLabel marks the ordinary pods of the traffic.
	PlainLabel = "soak.everynode.io/plain"
)

// Pools are the node pools, in the order nodes are dealt to them.
var Pools = []string{"a", "b", "c"}

// Kind is the API of a set.
type Kind string

const (
	// KindEverynode is everynode.io/v1alpha1.
	KindEverynode Kind = "everynode.io/v1alpha1"
	// KindApps is apps/v1, reconciled by everynode under --takeover.
	KindApps Kind = "apps/v1"
)

// SetSpec is one set of the soak: its kind and update strategy. The
// catalog is fixed (not drawn from the seed), so every run has every
// strategy; the seed decides what happens to them.
type SetSpec struct {
	Name string
	Kind Kind
	// Pool is the pool the set runs on; "" every soak node.
	Pool string
	// OnDelete: updateStrategy OnDelete (old pods go only when deleted).
	OnDelete bool
	// MaxUnavailable and MaxSurge are rollingUpdate's, "" for the default.
	MaxUnavailable, MaxSurge string
	// Partition is rollingUpdate.partition, "" for none.
	Partition string
	// Canary limits the update to pool a (rollingUpdate.nodeSelector).
	Canary bool
	// InPlace is the gate policy of podUpdatePolicy InPlaceIfPossible;
	// "" for Recreate.
	InPlace everynodev1alpha1.InPlaceGatePolicy
	// Overrides gives pool b's pods an env var of their own.
	Overrides bool
	// Sizing sizes the agent's cpu from the node's allocatable.
	Sizing bool
	// StartAfter names a set whose pod must be Ready on a node first.
	StartAfter string
	// OnFailure stops a failing rollout by itself.
	OnFailure               everynodev1alpha1.RolloutFailureAction
	MinReadySeconds         int32
	ProgressDeadlineSeconds int32
}

// Catalog is the soak's 20 sets. Sets that replace one pod at a time run
// on a pool, so that a rollout of theirs ends within the convergence bound
// at 500 nodes.
func Catalog() []SetSpec {
	return []SetSpec{
		{Name: "s00-mu1", Kind: KindEverynode, Pool: "a", MaxUnavailable: "1"},
		{Name: "s01-mu10pct", Kind: KindEverynode, MaxUnavailable: "10%"},
		{Name: "s02-surge1", Kind: KindEverynode, Pool: "a", MaxSurge: "1", MaxUnavailable: "0"},
		{Name: "s03-surge20pct", Kind: KindEverynode, MaxSurge: "20%", MaxUnavailable: "0"},
		{Name: "s04-ondelete", Kind: KindEverynode, Pool: "b", OnDelete: true},
		{Name: "s05-partition", Kind: KindEverynode, MaxUnavailable: "10%", Partition: "30%"},
		{Name: "s06-canary", Kind: KindEverynode, MaxUnavailable: "5%", Canary: true},
		{Name: "s07-inplace", Kind: KindEverynode, MaxUnavailable: "10%", InPlace: everynodev1alpha1.InPlaceGateAlways},
		{Name: "s08-inplace-never", Kind: KindEverynode, Pool: "c", MaxUnavailable: "25%", InPlace: everynodev1alpha1.InPlaceGateNever},
		{Name: "s09-overrides", Kind: KindEverynode, MaxUnavailable: "10%", Overrides: true},
		{Name: "s10-sizing", Kind: KindEverynode, MaxUnavailable: "10%", Sizing: true},
		{Name: "s11-after", Kind: KindEverynode, Pool: "a", MaxUnavailable: "20%", StartAfter: "s00-mu1"},
		{Name: "s12-after-apps", Kind: KindEverynode, Pool: "b", MaxUnavailable: "20%", StartAfter: "s16-apps"},
		{Name: "s13-rollback", Kind: KindEverynode, Pool: "c", MaxUnavailable: "2", OnFailure: everynodev1alpha1.RolloutFailureRollback, MinReadySeconds: 5},
		{Name: "s14-pause", Kind: KindEverynode, MaxUnavailable: "5%", OnFailure: everynodev1alpha1.RolloutFailurePause, ProgressDeadlineSeconds: 120},
		{Name: "s15-inplace-sizing", Kind: KindEverynode, Pool: "a", MaxUnavailable: "20%", InPlace: everynodev1alpha1.InPlaceGateIfServed, Sizing: true},
		{Name: "s16-apps", Kind: KindApps, MaxUnavailable: "10%"},
		{Name: "s17-apps-surge", Kind: KindApps, Pool: "b", MaxSurge: "1", MaxUnavailable: "0"},
		{Name: "s18-apps-ondelete", Kind: KindApps, Pool: "c", OnDelete: true},
		{Name: "s19-apps-mu1", Kind: KindApps, Pool: "a", MaxUnavailable: "1"},
	}
}

// Rolling reports whether the controller replaces old pods by itself.
func (s SetSpec) Rolling() bool { return !s.OnDelete }

// Pausable reports whether the set has rollingUpdate.paused (apps/v1 has
// not).
func (s SetSpec) Pausable() bool { return s.Kind == KindEverynode && s.Rolling() }

// Limited reports whether the set keeps nodes on an old revision on
// purpose (a partition or a canary selector).
func (s SetSpec) Limited() bool { return s.Partition != "" || s.Canary }

// Describe is the set's strategy in a few words, for the report.
func (s SetSpec) Describe() string {
	d := "RollingUpdate"
	if s.OnDelete {
		d = "OnDelete"
	}
	if s.MaxUnavailable != "" {
		d += " maxUnavailable " + s.MaxUnavailable
	}
	if s.MaxSurge != "" {
		d += " maxSurge " + s.MaxSurge
	}
	if s.Partition != "" {
		d += " partition " + s.Partition
	}
	if s.Canary {
		d += " canary pool=a"
	}
	if s.InPlace != "" {
		d += " InPlaceIfPossible/" + string(s.InPlace)
	}
	if s.Overrides {
		d += " nodeOverrides"
	}
	if s.Sizing {
		d += " nodeSizing"
	}
	if s.StartAfter != "" {
		d += " startAfter " + s.StartAfter
	}
	if s.OnFailure != "" {
		d += " onFailure " + string(s.OnFailure)
	}
	where := "all nodes"
	if s.Pool != "" {
		where = "pool " + s.Pool
	}
	return fmt.Sprintf("%s, %s, %s", s.Kind, d, where)
}

// Image is the agent's image of a set at a tag: "v3" runs, "crash-loop-3"
// crash-loops (e2e/kwok/README.md).
func (s SetSpec) Image(tag string) string {
	return fmt.Sprintf("registry.example/soak-%s:%s", s.Name, tag)
}

// Selector is the set's selector.
func (s SetSpec) Selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.Name}}
}

// NodeSelector is where the set's pods run.
func (s SetSpec) NodeSelector() map[string]string {
	sel := map[string]string{NodeLabel: "true"}
	if s.Pool != "" {
		sel[PoolLabel] = s.Pool
	}
	return sel
}

// Template is the set's pod template at image tag and revision rev (an
// env var: a change of rev alone is not image-only, so it recreates even
// where the set updates in place).
func (s SetSpec) Template(tag string, rev int) corev1.PodTemplateSpec {
	labels := map[string]string{"app": s.Name, SetLabel: s.Name}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  s.NodeSelector(),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name:  "agent",
				Image: s.Image(tag),
				Env:   []corev1.EnvVar{{Name: "SOAK_REV", Value: strconv.Itoa(rev)}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
		},
	}
}

// SizingRule is the nodeSizing of a set that has one, at cpu fraction f
// of the node's allocatable.
func SizingRule(fraction string) []everynodev1alpha1.ContainerSizing {
	return []everynodev1alpha1.ContainerSizing{{Name: "agent", Resources: []everynodev1alpha1.ResourceSizing{{
		Resource: corev1.ResourceCPU,
		Requests: everynodev1alpha1.ResourceShare{Fraction: fraction, Min: ptr.To(resource.MustParse("10m")), Max: ptr.To(resource.MustParse("500m"))},
	}}}}
}

// SizingFractions are the values the sizing traffic moves between.
var SizingFractions = []string{"0.005", "0.01", "0.02"}

func intOrString(v string) *intstr.IntOrString {
	if v == "" {
		return nil
	}
	return ptr.To(intstr.Parse(v))
}

// Everynode is the set as an everynode.io/v1alpha1 DaemonSet in ns.
func (s SetSpec) Everynode(ns string, tmpl corev1.PodTemplateSpec) *everynodev1alpha1.DaemonSet {
	ds := &everynodev1alpha1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Labels: map[string]string{SetLabel: s.Name}},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector:        s.Selector(),
			Template:        tmpl,
			MinReadySeconds: s.MinReadySeconds,
		},
	}
	if s.ProgressDeadlineSeconds > 0 {
		ds.Spec.ProgressDeadlineSeconds = ptr.To(s.ProgressDeadlineSeconds)
	}
	if s.OnDelete {
		ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	} else {
		ru := &everynodev1alpha1.RollingUpdateDaemonSet{
			MaxUnavailable: intOrString(s.MaxUnavailable),
			MaxSurge:       intOrString(s.MaxSurge),
			Partition:      intOrString(s.Partition),
		}
		if s.Canary {
			ru.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{PoolLabel: "a"}}
		}
		if s.InPlace != "" {
			ru.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
			ru.InPlaceGatePolicy = s.InPlace
		}
		if s.OnFailure != "" {
			ru.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{Action: s.OnFailure, FailedPods: ptr.To[int32](2), MaxRestarts: ptr.To[int32](3)}
		}
		ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: ru}
	}
	if s.Overrides {
		ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{PoolLabel: "b"}},
			Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","env":[{"name":"POOL","value":"b"}]}]}}`)},
		}}
	}
	if s.Sizing {
		ds.Spec.NodeSizing = SizingRule(SizingFractions[1])
	}
	if s.StartAfter != "" {
		dep := everynodev1alpha1.StartDependency{Name: s.StartAfter}
		if spec, ok := Lookup(s.StartAfter); ok && spec.Kind == KindApps {
			dep.APIGroup = everynodev1alpha1.GroupApps
		}
		ds.Spec.StartAfter = []everynodev1alpha1.StartDependency{dep}
	}
	return ds
}

// Apps is the set as an apps/v1 DaemonSet in ns.
func (s SetSpec) Apps(ns string, tmpl corev1.PodTemplateSpec) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Labels: map[string]string{SetLabel: s.Name}},
		Spec: appsv1.DaemonSetSpec{
			Selector:        s.Selector(),
			Template:        tmpl,
			MinReadySeconds: s.MinReadySeconds,
		},
	}
	if s.OnDelete {
		ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	} else {
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: intOrString(s.MaxUnavailable), MaxSurge: intOrString(s.MaxSurge)}}
	}
	return ds
}

// Lookup finds a set of the catalog by name.
func Lookup(name string) (SetSpec, bool) {
	for _, s := range Catalog() {
		if s.Name == name {
			return s, true
		}
	}
	return SetSpec{}, false
}
