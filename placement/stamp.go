package placement

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// controllerKind is the kind in the owner reference of every daemon pod and
// revision of an everynode set (AppsKind for a set converted from apps/v1).
var controllerKind = everynodev1alpha1.SchemeGroupVersion.WithKind(KindDaemonSet)

// templateGenerationLabel is the label upstream's DaemonSet controller
// gives each pod: the set's template generation (the API server keeps it
// in the set's appsv1.DeprecatedTemplateGeneration annotation). Deprecated
// upstream in favour of the revision hash, but still written and read
// (a pod with either one current counts as updated), so pods everynode
// makes for an apps/v1 set carry it too.
const templateGenerationLabel = TemplateGenerationLabel

// TemplateGenerationLabel is the label every pod of upstream's DaemonSet
// controller carries, and only those: how everynode selects the pods of
// apps/v1 DaemonSets that spec.startAfter may name.
const TemplateGenerationLabel = "pod-template-generation"

// NewControllerRef returns the owner reference that makes ds the controller
// of a pod or ControllerRevision: of apps/v1's kind for a set converted
// from one (IsApps), else of everynode's.
func NewControllerRef(ds *everynodev1alpha1.DaemonSet) metav1.OwnerReference {
	if IsApps(ds) {
		return *metav1.NewControllerRef(ds, AppsKind)
	}
	return *metav1.NewControllerRef(ds, controllerKind)
}

// NewPod returns the pod ds runs on node, from the revision with the given
// hash, as the contract between the controller and the pod webhook wants it
// (shared/DESIGN.md): generateName `<set>-`, the template's labels plus the
// revision hash, the set as controlling owner, and the daemon stamp (Stamp).
// ds is not modified.
func NewPod(ds *everynodev1alpha1.DaemonSet, node, hash string) *corev1.Pod {
	pod := unstampedPod(ds, hash)
	Stamp(pod, node)
	return pod
}

// unstampedPod is the pod of ds's template, owned by ds and labelled with
// hash, not yet made any node's.
func unstampedPod(ds *everynodev1alpha1.DaemonSet, hash string) *corev1.Pod {
	tmpl := ds.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name = ""
	pod.GenerateName = ds.Name + "-"
	pod.Namespace = ds.Namespace
	pod.ResourceVersion = ""
	pod.UID = ""
	pod.CreationTimestamp = metav1.Time{}
	pod.Finalizers = nil
	pod.OwnerReferences = []metav1.OwnerReference{NewControllerRef(ds)}
	if pod.Labels == nil {
		pod.Labels = make(map[string]string, 2)
	}
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	if gen, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; ok && IsApps(ds) {
		pod.Labels[templateGenerationLabel] = gen
	}
	return pod
}

// NewPodFor is the pod the controller creates: NewPod for node with the
// set's node overrides that match the node's labels applied, stamped again
// so no override can undo the pin or the tolerations, given schedulerName
// (WithSchedulerName), and marked made whole (AnnotationMadeWhole): it is
// what /mutate/pod would make of it, so the webhook is not called for it.
// Overrides hold in every namespace, webhooks or not. Then the containers
// spec.nodeSizing names get the node's sizes (SizeOf), after the
// overrides, so the sizes win. node may be nil for a set with neither
// (NeedsNode).
//
// An override that changes what decides eligibility (OverrideChanges) is
// an error: the node was chosen from the template's. Validation refuses
// such an override; where no webhook runs, this refuses the pod.
//
// The in-place readiness gate is the controller's to add
// (Strategy.GatesNewPod): under IfServed it depends on the Services of
// the namespace.
func NewPodFor(ds *everynodev1alpha1.DaemonSet, node *corev1.Node, nodeName, hash, schedulerName string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	if len(ds.Spec.NodeOverrides) == 0 {
		pod = NewPod(ds, nodeName, hash)
	} else {
		if node == nil {
			return nil, fmt.Errorf("node %q is needed to apply the set's nodeOverrides", nodeName)
		}
		pod = unstampedPod(ds, hash)
		if err := ApplyNodeOverrides(pod, ds.Spec.NodeOverrides, node); err != nil {
			return nil, err
		}
		if changed := OverrideChanges(&ds.Spec.Template.Spec, &pod.Spec); len(changed) > 0 {
			return nil, fmt.Errorf("the nodeOverrides matching node %s change %s, which decide which nodes run the set: set them in the template", nodeName, strings.Join(changed, ", "))
		}
		Stamp(pod, nodeName)
	}
	if len(ds.Spec.NodeSizing) > 0 {
		if node == nil {
			return nil, fmt.Errorf("node %q is needed to size the set's pod (spec.nodeSizing)", nodeName)
		}
		ApplySize(pod, SizeOf(ds.Spec.NodeSizing, node))
	}
	WithSchedulerName(pod, schedulerName)
	pod.Annotations[everynodev1alpha1.AnnotationMadeWhole] = everynodev1alpha1.AnnotationMadeWholeValue
	return pod, nil
}

// NeedsNode reports whether NewPodFor needs the node object, not only its
// name: for the set's node overrides or its node sizing.
func NeedsNode(ds *everynodev1alpha1.DaemonSet) bool {
	return len(ds.Spec.NodeOverrides) > 0 || len(ds.Spec.NodeSizing) > 0
}

// WithSchedulerName gives pod the scheduler name of the installation (a
// second kube-scheduler that calls the extender, for clusters whose own
// scheduler cannot), unless name is empty or the template chose a
// scheduler of its own.
func WithSchedulerName(pod *corev1.Pod, name string) {
	if name != "" && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName) {
		pod.Spec.SchedulerName = name
	}
}

// Stamp makes pod the daemon pod for node, in place: the daemon-pod label
// (which the pod webhooks select on), the target node annotation, the
// required node affinity replaced by the pin to node (PinToNode, never
// nodeName, so the scheduler and its extender still see the pod), and the
// default daemon tolerations (WithDaemonTolerations), and the daemon-pod
// marker resource when it is on (WithDaemonResource), which keeps every
// other pod out of the extender's interest.
//
// The controller stamps the pods it makes, so a set is correct where no
// webhook runs (webhooks skip kube-system, where the upstream docs' own
// DaemonSet lives); the pod webhook stamps again after a set's node
// overrides, so no override can undo it. Stamp is idempotent, so the API
// server may reinvoke the webhook and get the same pod back.
func Stamp(pod *corev1.Pod, node string) {
	if pod.Labels == nil {
		pod.Labels = make(map[string]string, 1)
	}
	pod.Labels[everynodev1alpha1.LabelDaemonPod] = everynodev1alpha1.LabelDaemonPodValue
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string, 1)
	}
	pod.Annotations[everynodev1alpha1.AnnotationTargetNode] = node
	pod.Spec.Affinity = PinToNode(pod.Spec.Affinity, node)
	pod.Spec.Tolerations = WithDaemonTolerations(pod.Spec.Tolerations, pod.Spec.HostNetwork)
	WithDaemonResource(pod)
}
