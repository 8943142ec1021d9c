package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// validatePodTemplateStatic is the fallback when the API server cannot
// validate the template as a pod (validateTemplateAsPod): the upstream pod
// checks that catch the common mistakes, with upstream's field paths and
// messages. It is deliberately not all of upstream ValidatePodSpec, which
// lives in k8s.io/kubernetes and changes with every release; the dry run is
// the faithful check, this only keeps an outage from letting obvious errors
// through.
func validatePodTemplateStatic(tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, fldPath.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(tmpl.Annotations, fldPath.Child("metadata", "annotations"))...)

	spec := &tmpl.Spec
	specPath := fldPath.Child("spec")
	volumes, volErrs := validateVolumes(spec.Volumes, specPath.Child("volumes"))
	errs = append(errs, volErrs...)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(specPath.Child("containers"), ""))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.InitContainers, specPath.Child("initContainers"), names, volumes)...)
	errs = append(errs, validateContainers(spec.Containers, specPath.Child("containers"), names, volumes)...)
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}

	switch spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault:
	case corev1.DNSNone:
		if spec.DNSConfig == nil {
			errs = append(errs, field.Required(specPath.Child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None"))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("dnsPolicy"), spec.DNSPolicy,
			[]string{string(corev1.DNSClusterFirstWithHostNet), string(corev1.DNSClusterFirst), string(corev1.DNSDefault), string(corev1.DNSNone)}))
	}
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, specPath.Child("nodeSelector"))...)
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if _, err := nodeaffinity.NewNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"), field.OmitValueType{}, err.Error()))
		}
	}
	errs = append(errs, validateTolerations(spec.Tolerations, specPath.Child("tolerations"))...)
	return errs
}

func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		namePath := fldPath.Index(i).Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(namePath, v.Name))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
			}
		}
		names.Insert(v.Name)
	}
	return names, errs
}

func validateContainers(containers []corev1.Container, fldPath *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(namePath, c.Name))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(namePath, c.Name, msg))
			}
		}
		names.Insert(c.Name)
		if c.Image == "" {
			errs = append(errs, field.Required(idxPath.Child("image"), ""))
		} else if c.Image != strings.TrimSpace(c.Image) {
			errs = append(errs, field.Invalid(idxPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		errs = append(errs, validatePorts(c.Ports, idxPath.Child("ports"))...)
		for j, m := range c.VolumeMounts {
			mPath := idxPath.Child("volumeMounts").Index(j)
			if m.Name == "" {
				errs = append(errs, field.Required(mPath.Child("name"), ""))
			} else if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(mPath.Child("name"), m.Name))
			}
			if m.MountPath == "" {
				errs = append(errs, field.Required(mPath.Child("mountPath"), ""))
			}
		}
		for name, req := range c.Resources.Requests {
			if limit, ok := c.Resources.Limits[name]; ok && req.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(idxPath.Child("resources", "requests").Key(string(name)), req.String(),
					"must be less than or equal to "+string(name)+" limit of "+limit.String()))
			}
		}
	}
	return errs
}

var supportedProtocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}

func validatePorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		if p.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), p.Name, msg))
			}
		}
		for _, msg := range utilvalidation.IsValidPortNum(int(p.ContainerPort)) {
			errs = append(errs, field.Invalid(idxPath.Child("containerPort"), p.ContainerPort, msg))
		}
		if p.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(idxPath.Child("hostPort"), p.HostPort, msg))
			}
		}
		switch p.Protocol {
		case "":
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), p.Protocol, supportedProtocols))
		}
	}
	return errs
}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := utilvalidation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		case corev1.TolerationOpLt, corev1.TolerationOpGt:
			// Behind a feature gate upstream; the API server decides.
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("operator"), t.Operator,
				[]string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idxPath.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("effect"), t.Effect,
				[]string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
	}
	return errs
}
