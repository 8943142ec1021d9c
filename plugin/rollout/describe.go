package rollout

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// describeRevision renders what a revision makes, in the layout of
// kubectl's DescribePodTemplate (which `kubectl rollout history --revision`
// prints), followed by everynode's node overrides, which a revision stores
// too. It is a subset: the fields that tell revisions apart in practice
// (images, commands, resources, env, mounts, volumes, scheduling). It is
// written here rather than imported because k8s.io/kubectl/pkg/describe
// would pull most of kubectl into the plugin; -o yaml shows everything.
func describeRevision(t *corev1.PodTemplateSpec, overrides []everynodev1alpha1.NodeOverride) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	w := func(level int, format string, args ...any) {
		fmt.Fprintf(tw, strings.Repeat("  ", level)+format, args...)
	}
	w(0, "Pod Template:\n")
	describeMap(w, 1, "Labels", t.Labels)
	if len(t.Annotations) > 0 {
		describeMap(w, 1, "Annotations", t.Annotations)
	}
	if sa := t.Spec.ServiceAccountName; sa != "" {
		w(1, "Service Account:\t%s\n", sa)
	}
	if len(t.Spec.InitContainers) > 0 {
		describeContainers(w, "Init Containers", t.Spec.InitContainers)
	}
	describeContainers(w, "Containers", t.Spec.Containers)
	describeVolumes(w, t.Spec.Volumes)
	if pc := t.Spec.PriorityClassName; pc != "" {
		w(1, "Priority Class Name:\t%s\n", pc)
	}
	describeMap(w, 1, "Node-Selectors", t.Spec.NodeSelector)
	describeTolerations(w, t.Spec.Tolerations)
	if len(overrides) > 0 {
		w(0, "Node Overrides:\n")
		for _, o := range overrides {
			w(1, "Node Selector:\t%s\n", metav1.FormatLabelSelector(o.NodeSelector))
			w(2, "Patch:\t%s\n", strings.TrimSpace(string(o.Patch.Raw)))
		}
	}
	_ = tw.Flush()
	return buf.String()
}

type lineWriter func(level int, format string, args ...any)

// describeMap prints "Title: k=v" with further pairs aligned below, sorted,
// or <none>.
func describeMap(w lineWriter, level int, title string, m map[string]string) {
	if len(m) == 0 {
		w(level, "%s:\t<none>\n", title)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			w(level, "%s:\t%s=%s\n", title, k, m[k])
			continue
		}
		w(level, "\t%s=%s\n", k, m[k])
	}
}

func describeContainers(w lineWriter, title string, containers []corev1.Container) {
	if len(containers) == 0 {
		w(1, "%s:\t<none>\n", title)
		return
	}
	w(1, "%s:\n", title)
	for i := range containers {
		c := &containers[i]
		w(1, " %s:\n", c.Name)
		w(2, "Image:\t%s\n", c.Image)
		ports := make([]string, 0, len(c.Ports))
		for _, p := range c.Ports {
			s := fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)
			if p.HostPort != 0 {
				s += fmt.Sprintf(" (host %d)", p.HostPort)
			}
			if p.Name != "" {
				s += " (" + p.Name + ")"
			}
			ports = append(ports, s)
		}
		if len(ports) == 0 {
			w(2, "Port:\t<none>\n")
		} else {
			w(2, "Ports:\t%s\n", strings.Join(ports, ", "))
		}
		describeList(w, "Command", c.Command)
		describeList(w, "Args", c.Args)
		describeResources(w, "Limits", c.Resources.Limits)
		describeResources(w, "Requests", c.Resources.Requests)
		describeEnv(w, c.Env)
		if len(c.VolumeMounts) == 0 {
			w(2, "Mounts:\t<none>\n")
		} else {
			w(2, "Mounts:\n")
			for _, m := range c.VolumeMounts {
				mode := "rw"
				if m.ReadOnly {
					mode = "ro"
				}
				w(3, "%s from %s (%s)\n", m.MountPath, m.Name, mode)
			}
		}
	}
}

func describeList(w lineWriter, title string, items []string) {
	if len(items) == 0 {
		return
	}
	w(2, "%s:\n", title)
	for _, s := range items {
		w(3, "%s\n", s)
	}
}

func describeResources(w lineWriter, title string, rl corev1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	w(2, "%s:\n", title)
	for _, n := range names {
		q := rl[corev1.ResourceName(n)]
		w(3, "%s:\t%s\n", n, q.String())
	}
}

func describeEnv(w lineWriter, env []corev1.EnvVar) {
	if len(env) == 0 {
		w(2, "Environment:\t<none>\n")
		return
	}
	w(2, "Environment:\n")
	for _, e := range env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil:
				v = fmt.Sprintf("(%s:%s)", f.FieldRef.APIVersion, f.FieldRef.FieldPath)
			case f.ResourceFieldRef != nil:
				v = fmt.Sprintf("(%s)", f.ResourceFieldRef.Resource)
			case f.SecretKeyRef != nil:
				v = fmt.Sprintf("<set to the key '%s' in secret '%s'>", f.SecretKeyRef.Key, f.SecretKeyRef.Name)
			case f.ConfigMapKeyRef != nil:
				v = fmt.Sprintf("<set to the key '%s' of config map '%s'>", f.ConfigMapKeyRef.Key, f.ConfigMapKeyRef.Name)
			}
		}
		w(3, "%s:\t%s\n", e.Name, v)
	}
}

func describeVolumes(w lineWriter, volumes []corev1.Volume) {
	if len(volumes) == 0 {
		w(1, "Volumes:\t<none>\n")
		return
	}
	w(1, "Volumes:\n")
	for _, v := range volumes {
		w(2, "%s:\t%s\n", v.Name, volumeSource(&v.VolumeSource))
	}
}

// volumeSource names the kind of a volume and what it points at.
func volumeSource(s *corev1.VolumeSource) string {
	switch {
	case s.HostPath != nil:
		return "HostPath " + s.HostPath.Path
	case s.EmptyDir != nil:
		return "EmptyDir"
	case s.ConfigMap != nil:
		return "ConfigMap " + s.ConfigMap.Name
	case s.Secret != nil:
		return "Secret " + s.Secret.SecretName
	case s.PersistentVolumeClaim != nil:
		return "PersistentVolumeClaim " + s.PersistentVolumeClaim.ClaimName
	case s.Projected != nil:
		return "Projected"
	case s.DownwardAPI != nil:
		return "DownwardAPI"
	case s.CSI != nil:
		return "CSI " + s.CSI.Driver
	}
	return "<other>"
}

func describeTolerations(w lineWriter, tolerations []corev1.Toleration) {
	if len(tolerations) == 0 {
		w(1, "Tolerations:\t<none>\n")
		return
	}
	for i, t := range tolerations {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			if s == "" {
				s = "op=Exists"
			} else {
				s += " op=Exists"
			}
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		if i == 0 {
			w(1, "Tolerations:\t%s\n", s)
		} else {
			w(1, "\t%s\n", s)
		}
	}
}
