package placement

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utiljson "sigs.k8s.io/json"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// In-place updates (rollingUpdate.podUpdatePolicy: InPlaceIfPossible). The
// rules here are pure; the controller's rolling update decides with them
// which pods to patch rather than recreate, and the view reads a pod's
// progress with them.
//
// A pod's lifecycle under an in-place update:
//
//  1. The controller sets the pod's gate condition False when the pod has
//     the gate and the gate policy closes it for the pod (ClosesGate), so
//     the pod leaves Service endpoints before anything stops.
//  2. One patch moves the pod to the new revision: the changed images, the
//     revision hash label, and AnnotationInPlaceUpdate recording the
//     containers that ran before (InPlaceUpdate).
//  3. The kubelet stops each changed container and starts it again with
//     the new image. The pod counts as unavailable until InPlaceDone.
//  4. The controller sets the gate condition True, if it closed it.

// InPlace reports whether the strategy updates pods in place where it can.
func (s *Strategy) InPlace() bool {
	return s.RollingUpdate() && s.PodUpdate == everynodev1alpha1.PodUpdateInPlaceIfPossible
}

// GatesNewPod reports whether a new pod of a set with this strategy gets
// the in-place readiness gate: only where the set updates in place, then
// under Always, and under IfServed when a Service of the pod's namespace
// selects its labels (served). The gate costs a request per pod made (no
// kubelet sets its condition), and a pod's gates are fixed when it is
// made: under IfServed, a pod made before a Service selects it has none
// until it is recreated.
func (s *Strategy) GatesNewPod(served bool) bool {
	if !s.InPlace() {
		return false
	}
	switch s.GatePolicy {
	case everynodev1alpha1.InPlaceGateAlways:
		return true
	case everynodev1alpha1.InPlaceGateIfServed:
		return served
	default:
		return false
	}
}

// ClosesGate reports whether moving a pod in place closes its readiness
// gate around the patch (gate False, patch, gate True: three requests)
// rather than sending the patch alone (one): only a pod that has the gate
// (gated: none can be added to a running pod), then under Always, and
// under IfServed when some EndpointSlice lists the pod (listed): a gate
// protects the traffic Services send, and a pod no slice lists gets none.
// Under Never, a pod that has the gate from before is patched alone.
func (s *Strategy) ClosesGate(gated, listed bool) bool {
	if !gated {
		return false
	}
	switch s.GatePolicy {
	case everynodev1alpha1.InPlaceGateAlways:
		return true
	case everynodev1alpha1.InPlaceGateIfServed:
		return listed
	default:
		return false
	}
}

// GateNeedsListing reports whether ClosesGate reads listed: only under
// IfServed, so that the controller looks the pod up in the EndpointSlice
// index only then.
func (s *Strategy) GateNeedsListing() bool {
	return s.GatePolicy == everynodev1alpha1.InPlaceGateIfServed
}

// GateNeedsService reports whether GatesNewPod reads served: only for a set
// that updates in place under IfServed.
func (s *Strategy) GateNeedsService() bool {
	return s.InPlace() && s.GatePolicy == everynodev1alpha1.InPlaceGateIfServed
}

// WithInPlaceGate adds the in-place readiness gate to pod, once.
func WithInPlaceGate(pod *corev1.Pod) {
	if !HasInPlaceGate(pod) {
		pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: everynodev1alpha1.ConditionInPlaceUpdateReady})
	}
}

// HasInPlaceGate reports whether pod has the in-place readiness gate.
func HasInPlaceGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == everynodev1alpha1.ConditionInPlaceUpdateReady {
			return true
		}
	}
	return false
}

// InPlaceGateCondition returns the pod's in-place gate condition, or nil.
func InPlaceGateCondition(pod *corev1.Pod) *corev1.PodCondition {
	return podCondition(pod, everynodev1alpha1.ConditionInPlaceUpdateReady)
}

// ImagesOnlyChange reports whether moving a pod from one revision's
// template to another's can be done in place: the same containers and init
// containers by name and order, with only their images different, and
// nothing else changed, metadata included (a label or an annotation may be
// read by anything, and `rollout restart` changes an annotation to get new
// pods). Templates that are equal are not a change.
func ImagesOnlyChange(from, to *corev1.PodTemplateSpec) bool {
	if len(from.Spec.Containers) != len(to.Spec.Containers) || len(from.Spec.InitContainers) != len(to.Spec.InitContainers) {
		return false
	}
	a, b := from.DeepCopy(), to.DeepCopy()
	changed := false
	for _, pair := range [][2][]corev1.Container{{a.Spec.Containers, b.Spec.Containers}, {a.Spec.InitContainers, b.Spec.InitContainers}} {
		for i := range pair[0] {
			if pair[0][i].Image != pair[1][i].Image {
				changed = true
			}
			pair[0][i].Image, pair[1][i].Image = "", ""
		}
	}
	return changed && equality.Semantic.DeepEqual(a, b)
}

// InPlaceUpdate is what AnnotationInPlaceUpdate records of a pod's last
// in-place update.
type InPlaceUpdate struct {
	// Revision is the revision hash the update moved the pod to.
	Revision string
	// Time is when the patch was sent, to the second: the rollout's
	// failure policy counts the pod's age from it.
	Time time.Time
	// Restarts is the pod's restart count (all containers) the update
	// leaves it with: the count before, plus one for each container the
	// kubelet restarts for it. The failure policy counts restarts above it.
	Restarts int32
	// Containers are the containers (and restartable init containers)
	// whose image changed, as they were before the patch.
	Containers []InPlaceContainer
}

// InPlaceContainer is a container as it ran before an in-place update.
// Its JSON names are those of the pod's container statuses.
type InPlaceContainer struct {
	Name        string `json:"name"`
	ImageID     string `json:"imageID,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
}

// inPlaceRecord is AnnotationInPlaceUpdate's JSON: InPlaceUpdate under the
// names a person reading the pod expects, the time in RFC 3339.
type inPlaceRecord struct {
	Revision           string             `json:"revision"`
	UpdateTime         string             `json:"updateTime"`
	RestartCount       int32              `json:"restartCount"`
	PreviousContainers []InPlaceContainer `json:"previousContainers,omitempty"`
}

// String is the annotation's value, compact JSON (one line) in a fixed
// field order:
//
//	{"revision":"5f7c9d","updateTime":"2023-11-14T22:13:20Z","restartCount":3,
//	 "previousContainers":[{"name":"app","imageID":"...","containerID":"..."}]}
//
// The time is UTC, to the second.
func (u *InPlaceUpdate) String() string {
	// Strings and an integer always encode.
	raw, _ := json.Marshal(inPlaceRecord{
		Revision:           u.Revision,
		UpdateTime:         u.Time.UTC().Format(time.RFC3339),
		RestartCount:       u.Restarts,
		PreviousContainers: u.Containers,
	})
	return string(raw)
}

// ParseInPlaceUpdate reads AnnotationInPlaceUpdate, as String writes it or
// in the text format of older everynode releases (parseInPlaceText); ok is
// false when the value is neither. It never panics on any input.
func ParseInPlaceUpdate(s string) (u InPlaceUpdate, ok bool) {
	if !strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{") {
		return parseInPlaceText(s)
	}
	var r inPlaceRecord
	if err := utiljson.UnmarshalCaseSensitivePreserveInts([]byte(s), &r); err != nil {
		return InPlaceUpdate{}, false
	}
	at, err := time.Parse(time.RFC3339, r.UpdateTime)
	if err != nil || r.Revision == "" || r.RestartCount < 0 {
		return InPlaceUpdate{}, false
	}
	for _, c := range r.PreviousContainers {
		if c.Name == "" {
			return InPlaceUpdate{}, false
		}
	}
	return InPlaceUpdate{Revision: r.Revision, Time: at.UTC(), Restarts: r.RestartCount, Containers: r.PreviousContainers}, true
}

// inPlaceTextFormat is the first word of the text format.
const inPlaceTextFormat = "v1"

// parseInPlaceText reads the text format everynode wrote before the JSON
// one: "v1 <hash> <unix seconds> <restarts>" and one
// "<name>=<imageID>,<containerID>" per container, space separated. It is
// read only so that pods an older everynode updated in place keep their
// update when everynode is upgraded in the middle of a rollout; a later
// release may drop it.
//
// It accepts only what String can write back: valid UTF-8, a time in RFC
// 3339's years, no negative restart count (none of which it ever wrote).
func parseInPlaceText(s string) (u InPlaceUpdate, ok bool) {
	f := strings.Fields(s)
	if len(f) < 4 || f[0] != inPlaceTextFormat || !utf8.ValidString(s) {
		return u, false
	}
	sec, err1 := strconv.ParseInt(f[2], 10, 64)
	restarts, err2 := strconv.ParseInt(f[3], 10, 32)
	at := time.Unix(sec, 0).UTC()
	if err1 != nil || err2 != nil || restarts < 0 || at.Year() < 0 || at.Year() > 9999 {
		return u, false
	}
	u = InPlaceUpdate{Revision: f[1], Time: at, Restarts: int32(restarts)}
	for _, w := range f[4:] {
		name, ids, ok1 := strings.Cut(w, "=")
		imageID, containerID, ok2 := strings.Cut(ids, ",")
		if !ok1 || !ok2 || name == "" {
			return InPlaceUpdate{}, false
		}
		u.Containers = append(u.Containers, InPlaceContainer{Name: name, ImageID: imageID, ContainerID: containerID})
	}
	return u, true
}

// InPlaceUpdateOf returns the pod's in-place update to its current revision
// (its revision hash label), if it had one: a record of an older revision
// is history, not an update in progress.
func InPlaceUpdateOf(pod *corev1.Pod) (InPlaceUpdate, bool) {
	raw, ok := pod.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate]
	if !ok {
		return InPlaceUpdate{}, false
	}
	u, ok := ParseInPlaceUpdate(raw)
	if !ok || u.Revision != RevisionHash(pod) {
		return InPlaceUpdate{}, false
	}
	return u, true
}

// InPlaceStarted reports whether the kubelet has carried an in-place update
// out: every container it restarts has been started on the new image
// (moved, as InPlaceDone has it), ready or not. A container that turns not
// ready after that (a crash, a probe) is the kubelet's business, not the
// update's: the stop and start the update asked for are behind it.
func InPlaceStarted(pod *corev1.Pod, u *InPlaceUpdate) bool {
	for _, c := range u.Containers {
		st, spec := containerStatus(pod, c.Name)
		if st == nil || st.ImageID == "" || !moved(st, spec, &c) {
			return false
		}
	}
	return true
}

// moved reports whether st is another container than the one c recorded
// before the update: another image ID, or (a new tag of the same digest)
// another container ID naming the spec's image.
func moved(st *corev1.ContainerStatus, spec *corev1.Container, c *InPlaceContainer) bool {
	return st.ImageID != c.ImageID || (st.ContainerID != c.ContainerID && spec != nil && st.Image == spec.Image)
}

// InPlaceDone reports whether every container an in-place update restarts
// runs the new image, started and ready: its status reports an imageID
// other than the one before (or, when the new name resolves to the same
// digest, another container whose status names the spec's image). at is
// when the last of them started, for minReadySeconds.
func InPlaceDone(pod *corev1.Pod, u *InPlaceUpdate) (done bool, at time.Time) {
	for _, c := range u.Containers {
		st, spec := containerStatus(pod, c.Name)
		if st == nil || !st.Ready || st.Started == nil || !*st.Started || st.ImageID == "" {
			return false, time.Time{}
		}
		if !moved(st, spec, &c) {
			return false, time.Time{}
		}
		if r := st.State.Running; r != nil && r.StartedAt.After(at) {
			at = r.StartedAt.Time
		}
	}
	return true, at
}

// containerStatus finds a container's (or init container's) status and
// spec by name.
func containerStatus(pod *corev1.Pod, name string) (*corev1.ContainerStatus, *corev1.Container) {
	var spec *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			spec = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			spec = &pod.Spec.InitContainers[i]
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], spec
			}
		}
	}
	return nil, spec
}

// InPlacePatch returns the strategic merge patch that moves pod to the
// images of target (the pod the set would create on that node now, node
// overrides applied) and to the revision hash: the images, the hash label,
// and AnnotationInPlaceUpdate. It carries the pod's UID, so it cannot
// apply to another pod of the same name. ok is false when the two pods'
// containers do not pair up by name, or no image differs: the pod must be
// recreated. now is the update's time.
//
// changes says what it changes, for an event: "app: a:1 -> a:2, ...".
//
// A regular init container's new image is set but not waited for: it ran
// to completion already, and the kubelet runs it again only when the pod's
// sandbox is recreated. Restartable init containers (sidecars) restart.
func InPlacePatch(pod, target *corev1.Pod, hash string, now time.Time) (patch []byte, changes string, ok bool) {
	type image struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	u := InPlaceUpdate{Revision: hash, Time: now, Restarts: Restarts(pod)}
	var described []string
	diff := func(have, want []corev1.Container, waited func(*corev1.Container) bool) ([]image, bool) {
		if len(have) != len(want) {
			return nil, false
		}
		var out []image
		for i := range have {
			if have[i].Name != want[i].Name {
				return nil, false
			}
			if have[i].Image == want[i].Image {
				continue
			}
			out = append(out, image{Name: want[i].Name, Image: want[i].Image})
			described = append(described, fmt.Sprintf("%s: %s -> %s", want[i].Name, have[i].Image, want[i].Image))
			if waited(&have[i]) {
				st, _ := containerStatus(pod, have[i].Name)
				c := InPlaceContainer{Name: have[i].Name}
				if st != nil {
					c.ImageID, c.ContainerID = st.ImageID, st.ContainerID
				}
				u.Containers = append(u.Containers, c)
				u.Restarts++
			}
		}
		return out, true
	}
	containers, ok1 := diff(pod.Spec.Containers, target.Spec.Containers, func(*corev1.Container) bool { return true })
	inits, ok2 := diff(pod.Spec.InitContainers, target.Spec.InitContainers, func(c *corev1.Container) bool {
		return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	})
	if !ok1 || !ok2 || len(containers)+len(inits) == 0 {
		return nil, "", false
	}
	p := map[string]any{
		"metadata": map[string]any{
			"uid":         pod.UID,
			"labels":      map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash},
			"annotations": map[string]string{everynodev1alpha1.AnnotationInPlaceUpdate: u.String()},
		},
	}
	spec := map[string]any{}
	if len(containers) > 0 {
		spec["containers"] = containers
	}
	if len(inits) > 0 {
		spec["initContainers"] = inits
	}
	p["spec"] = spec
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, "", false
	}
	return raw, strings.Join(described, ", "), true
}

// Restarts is the restart count of all the pod's containers, init
// containers included.
func Restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			n += list[i].RestartCount
		}
	}
	return n
}

// InPlaceGatePatch is the status patch that sets the pod's in-place gate
// condition to status, with the reason and message a user reads in
// `kubectl describe pod`. Conditions merge by type, so nothing else of the
// status is touched.
func InPlaceGatePatch(status corev1.ConditionStatus, reason, message string, now time.Time) []byte {
	cond := map[string]any{
		"type":               everynodev1alpha1.ConditionInPlaceUpdateReady,
		"status":             status,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
		"reason":             reason,
		"message":            message,
	}
	raw, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	return raw
}
