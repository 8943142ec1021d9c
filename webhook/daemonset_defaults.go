package webhook

import (
	"reflect"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// defaultDaemonSet fills in what the API server fills in for an apps/v1
// DaemonSet, so a manifest moved from apps/v1 is stored and behaves the
// same: SetObjectDefaults_DaemonSet of k8s.io/kubernetes pkg/apis/apps/v1
// (zz_generated.defaults.go, v1.37), which is SetDefaults_DaemonSet followed
// by the core/v1 defaults of the pod template, with the values package
// placement reads where no webhook ran. Of everynode's own fields only
// rollingUpdate.onFailure's thresholds are written in, when it is set;
// progressDeadlineSeconds is left unset, so a set moved from apps/v1 is
// stored as apps/v1 stores it, and readers take its default (600) from
// placement. It changes ds in place and is
// idempotent.
func defaultDaemonSet(ds *everynodev1alpha1.DaemonSet) {
	strategy := &ds.Spec.UpdateStrategy
	if strategy.Type == "" {
		strategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if strategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if strategy.RollingUpdate == nil {
			strategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{}
		}
		if strategy.RollingUpdate.MaxUnavailable == nil {
			strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(placement.DefaultMaxUnavailable))
		}
		if strategy.RollingUpdate.MaxSurge == nil {
			strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(placement.DefaultMaxSurge))
		}
		if f := strategy.RollingUpdate.OnFailure; f != nil {
			if f.Action == "" {
				f.Action = everynodev1alpha1.RolloutFailurePause
			}
			if f.FailedPods == nil {
				f.FailedPods = ptr.To(placement.DefaultFailedPods)
			}
			if f.MaxRestarts == nil {
				f.MaxRestarts = ptr.To(placement.DefaultMaxRestarts)
			}
			if f.RestartWindowSeconds == nil {
				f.RestartWindowSeconds = ptr.To(placement.DefaultRestartWindowSeconds)
			}
		}
	}

	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr.To(placement.DefaultRevisionHistoryLimit)
	}
	defaultPodSpec(&ds.Spec.Template.Spec)
}

// defaultPodSpec applies the core/v1 defaults of a pod template's spec
// (SetDefaults_PodSpec and the generated per-field defaults). It leaves out
// SetDefaults_Pod (enableServiceLinks, requests from limits, host ports for
// hostNetwork), which upstream applies to pods but not to templates; the
// API server applies it to each pod the controller creates.
func defaultPodSpec(spec *corev1.PodSpec) {
	// serviceAccount is the deprecated alias of serviceAccountName; the
	// newer field wins when both are set.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUpResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundUpResourceList(spec.Resources.Limits)
		roundUpResourceList(spec.Resources.Requests)
	}
}

// defaultPullPolicy is upstream's rule: Always for a :latest image (or one
// with neither tag nor digest, which means :latest), IfNotPresent otherwise,
// including for a name that does not parse (validation reports that).
func defaultPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	tag := ""
	if tagged, ok := named.(reference.Tagged); ok {
		tag = tagged.Tag()
	}
	_, digested := named.(reference.Digested)
	if tag == "latest" || (tag == "" && !digested) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			if from.FieldRef != nil {
				defaultFieldSelector(from.FieldRef)
			}
			if from.FileKeyRef != nil && from.FileKeyRef.Optional == nil {
				from.FileKeyRef.Optional = ptr.To(false)
			}
		}
	}
	roundUpResourceList(c.Resources.Limits)
	roundUpResourceList(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			defaultProbe(p)
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

func defaultProbe(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultHTTPGet(a *corev1.HTTPGetAction) {
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

func defaultFieldSelector(s *corev1.ObjectFieldSelector) {
	if s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}

// roundUpResourceList rounds quantities up to milli scale, as upstream
// does "to maintain API compatibility" (SetDefaults_ResourceList).
func roundUpResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

func defaultVolume(v *corev1.Volume) {
	if reflect.ValueOf(v.VolumeSource).IsZero() {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = defaultPullPolicy(src.Image.Reference)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if rbd := src.RBD; rbd != nil {
		if rbd.RBDPool == "" {
			rbd.RBDPool = "rbd"
		}
		if rbd.RadosUser == "" {
			rbd.RadosUser = "admin"
		}
		if rbd.Keyring == "" {
			rbd.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range d.Items {
			if d.Items[i].FieldRef != nil {
				defaultFieldSelector(d.Items[i].FieldRef)
			}
		}
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if az := src.AzureDisk; az != nil {
		if az.CachingMode == nil {
			az.CachingMode = ptr.To(corev1.AzureDataDiskCachingReadWrite)
		}
		if az.FSType == nil {
			az.FSType = ptr.To("ext4")
		}
		if az.ReadOnly == nil {
			az.ReadOnly = ptr.To(false)
		}
		if az.Kind == nil {
			az.Kind = ptr.To(corev1.AzureSharedBlobDisk)
		}
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			s := &p.Sources[i]
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					if s.DownwardAPI.Items[j].FieldRef != nil {
						defaultFieldSelector(s.DownwardAPI.Items[j].FieldRef)
					}
				}
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
	if sio := src.ScaleIO; sio != nil {
		if sio.StorageMode == "" {
			sio.StorageMode = "ThinProvisioned"
		}
		if sio.FSType == "" {
			sio.FSType = "xfs"
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
		roundUpResourceList(spec.Resources.Limits)
		roundUpResourceList(spec.Resources.Requests)
	}
}
