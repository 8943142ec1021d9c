package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValidatePodTemplateStatic(t *testing.T) {
	const (
		invalid      = "FieldValueInvalid "
		required     = "FieldValueRequired "
		duplicate    = "FieldValueDuplicate "
		notFound     = "FieldValueNotFound "
		forbidden    = "FieldValueForbidden "
		notSupported = "FieldValueNotSupported "
		tmpl         = "spec.template."
		c0           = tmpl + "spec.containers[0]."
	)
	tests := map[string]struct {
		change func(p *corev1.PodTemplateSpec)
		want   []string
	}{
		"fluentd template is valid": {change: func(*corev1.PodTemplateSpec) {}},
		"bad label":                 {change: func(p *corev1.PodTemplateSpec) { p.Labels["bad key!"] = "x" }, want: []string{invalid + tmpl + "metadata.labels"}},
		"bad annotation":            {change: func(p *corev1.PodTemplateSpec) { p.Annotations = map[string]string{"/x": "y"} }, want: []string{invalid + tmpl + "metadata.annotations"}},
		"no containers":             {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers = nil }, want: []string{required + tmpl + "spec.containers"}},
		"container name required":   {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Name = "" }, want: []string{required + c0 + "name"}},
		"container name invalid":    {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Name = "Fluentd" }, want: []string{invalid + c0 + "name"}},
		"container name duplicate with init container": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.InitContainers = []corev1.Container{{Name: "fluentd-elasticsearch", Image: "busybox"}}
			},
			want: []string{duplicate + c0 + "name"},
		},
		"image required":            {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "" }, want: []string{required + c0 + "image"}},
		"image with whitespace":     {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = " fluentd" }, want: []string{invalid + c0 + "image"}},
		"volume mount of no volume": {change: func(p *corev1.PodTemplateSpec) { p.Spec.Volumes = nil }, want: []string{notFound + c0 + "volumeMounts[0].name"}},
		"mount path required":       {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }, want: []string{required + c0 + "volumeMounts[0].mountPath"}},
		"volume duplicate": {
			change: func(p *corev1.PodTemplateSpec) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) },
			want:   []string{duplicate + tmpl + "spec.volumes[1].name"},
		},
		"volume name invalid": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.Volumes[0].Name = "Var_Log"
				p.Spec.Containers[0].VolumeMounts[0].Name = "Var_Log"
			},
			want: []string{invalid + tmpl + "spec.volumes[0].name"},
		},
		"ports": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{
					{Name: "way-too-long-port-name", ContainerPort: 0, HostPort: 70000, Protocol: "ICMP"},
					{ContainerPort: 80},
				}
			},
			want: []string{invalid + c0 + "ports[0].name", invalid + c0 + "ports[0].containerPort", invalid + c0 + "ports[0].hostPort",
				notSupported + c0 + "ports[0].protocol", required + c0 + "ports[1].protocol"},
		},
		"requests above limits": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
			},
			want: []string{invalid + c0 + "resources.requests[memory]"},
		},
		"ephemeral containers": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
			},
			want: []string{forbidden + tmpl + "spec.ephemeralContainers"},
		},
		"dnsPolicy unknown": {change: func(p *corev1.PodTemplateSpec) { p.Spec.DNSPolicy = "Nearest" }, want: []string{notSupported + tmpl + "spec.dnsPolicy"}},
		"dnsPolicy None needs dnsConfig": {
			change: func(p *corev1.PodTemplateSpec) { p.Spec.DNSPolicy = corev1.DNSNone },
			want:   []string{required + tmpl + "spec.dnsConfig"},
		},
		"nodeSelector label": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "not valid"}
			},
			want: []string{invalid + tmpl + "spec.nodeSelector"},
		},
		"required node affinity does not parse": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn}}}},
				}}}
			},
			want: []string{invalid + tmpl + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"},
		},
		"tolerations": {
			change: func(p *corev1.PodTemplateSpec) {
				p.Spec.Tolerations = []corev1.Toleration{
					{Operator: corev1.TolerationOpEqual, Value: "x"},
					{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
					{Key: "k", Operator: "Like"},
					{Key: "k", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)},
					{Key: "k", Effect: "Sometimes"},
					{Key: "k", Operator: corev1.TolerationOpGt, Value: "5"},
				}
			},
			want: []string{invalid + tmpl + "spec.tolerations[0].operator", invalid + tmpl + "spec.tolerations[1].operator",
				notSupported + tmpl + "spec.tolerations[2].operator", invalid + tmpl + "spec.tolerations[3].effect",
				notSupported + tmpl + "spec.tolerations[4].effect"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			tc.change(&ds.Spec.Template)
			checkErrors(t, validatePodTemplateStatic(&ds.Spec.Template, field.NewPath("spec", "template")), tc.want, "")
		})
	}
}
