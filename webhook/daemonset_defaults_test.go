package webhook

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestDefaultDaemonSetStrategy(t *testing.T) {
	one, zero, five := intstr.FromInt32(1), intstr.FromInt32(0), intstr.FromString("5%")
	tests := map[string]struct {
		in   everynodev1alpha1.DaemonSetUpdateStrategy
		want everynodev1alpha1.DaemonSetUpdateStrategy
	}{
		"empty becomes RollingUpdate 1/0": {
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}},
		},
		"RollingUpdate without rollingUpdate": {
			in: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}},
		},
		"explicit maxSurge kept, maxUnavailable still defaulted as upstream": {
			in: everynodev1alpha1.DaemonSetUpdateStrategy{RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: &five}},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &five}},
		},
		"everynode fields kept": {
			in: everynodev1alpha1.DaemonSetUpdateStrategy{RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{Partition: &five, Paused: true}},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero, Partition: &five, Paused: true}},
		},
		"onFailure gets its thresholds": {
			in: everynodev1alpha1.DaemonSetUpdateStrategy{RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{OnFailure: &everynodev1alpha1.RolloutFailurePolicy{MaxRestarts: ptr.To[int32](0)}}},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero, OnFailure: &everynodev1alpha1.RolloutFailurePolicy{
					Action: everynodev1alpha1.RolloutFailurePause, FailedPods: ptr.To[int32](1), MaxRestarts: ptr.To[int32](0), RestartWindowSeconds: ptr.To[int32](600),
				}}},
		},
		"OnDelete gets no rollingUpdate": {
			in:   everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
		},
		"unknown type left for validation": {
			in:   everynodev1alpha1.DaemonSetUpdateStrategy{Type: "Sometimes"},
			want: everynodev1alpha1.DaemonSetUpdateStrategy{Type: "Sometimes"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := &everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{UpdateStrategy: tc.in}}
			defaultDaemonSet(ds)
			if d := diff.Diff(tc.want, ds.Spec.UpdateStrategy); d != "" {
				t.Errorf("updateStrategy (-want +got):\n%s", d)
			}
		})
	}
}

func TestDefaultDaemonSetRevisionHistoryLimit(t *testing.T) {
	tests := map[string]struct {
		in   *int32
		want int32
	}{
		"unset is 10":  {want: 10},
		"zero is kept": {in: ptr.To[int32](0), want: 0},
		"3 is kept":    {in: ptr.To[int32](3), want: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := &everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{RevisionHistoryLimit: tc.in}}
			defaultDaemonSet(ds)
			if got := ptr.Deref(ds.Spec.RevisionHistoryLimit, -1); got != tc.want {
				t.Errorf("revisionHistoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDefaultPodSpec(t *testing.T) {
	tests := map[string]struct {
		in   corev1.PodSpec
		want corev1.PodSpec
	}{
		"empty spec": {
			want: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				SchedulerName: corev1.DefaultSchedulerName, TerminationGracePeriodSeconds: ptr.To[int64](30),
				SecurityContext: &corev1.PodSecurityContext{},
			},
		},
		"explicit values kept": {
			in: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure, DNSPolicy: corev1.DNSClusterFirstWithHostNet,
				SchedulerName: "other", TerminationGracePeriodSeconds: ptr.To[int64](0),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			},
			want: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure, DNSPolicy: corev1.DNSClusterFirstWithHostNet,
				SchedulerName: "other", TerminationGracePeriodSeconds: ptr.To[int64](0),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			},
		},
		"deprecated serviceAccount fills serviceAccountName": {
			in:   corev1.PodSpec{DeprecatedServiceAccount: "old"},
			want: withBaseDefaults(corev1.PodSpec{DeprecatedServiceAccount: "old", ServiceAccountName: "old"}),
		},
		"serviceAccountName wins and is mirrored": {
			in:   corev1.PodSpec{DeprecatedServiceAccount: "old", ServiceAccountName: "new"},
			want: withBaseDefaults(corev1.PodSpec{DeprecatedServiceAccount: "new", ServiceAccountName: "new"}),
		},
		"pod-only defaults are not applied to a template": {
			in:   corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "i:1", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
			want: withBaseDefaults(corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{withContainerDefaults(corev1.Container{Name: "c", Image: "i:1", ImagePullPolicy: corev1.PullIfNotPresent, Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}})}}),
		},
		"pod overhead and pod resources rounded up to milli": {
			in: corev1.PodSpec{
				Overhead:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1.0001")}},
			},
			want: withBaseDefaults(corev1.PodSpec{
				Overhead:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1001m")}},
			}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.in.DeepCopy()
			defaultPodSpec(got)
			if !equality.Semantic.DeepEqual(&tc.want, got) {
				t.Errorf("defaulted spec (-want +got):\n%s", diff.Diff(&tc.want, got))
			}
		})
	}
}

func withBaseDefaults(s corev1.PodSpec) corev1.PodSpec {
	s.RestartPolicy, s.DNSPolicy, s.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	s.TerminationGracePeriodSeconds, s.SecurityContext = ptr.To[int64](30), &corev1.PodSecurityContext{}
	return s
}

func withContainerDefaults(c corev1.Container) corev1.Container {
	c.TerminationMessagePath, c.TerminationMessagePolicy = corev1.TerminationMessagePathDefault, corev1.TerminationMessageReadFile
	return c
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := map[string]corev1.PullPolicy{
		"nginx":                               corev1.PullAlways,
		"nginx:latest":                        corev1.PullAlways,
		"nginx:1.27":                          corev1.PullIfNotPresent,
		"registry:5000/team/agent":            corev1.PullAlways,
		"registry:5000/team/agent:v2":         corev1.PullIfNotPresent,
		"nginx@sha256:" + sha256Zeroes:        corev1.PullIfNotPresent,
		"nginx:latest@sha256:" + sha256Zeroes: corev1.PullAlways,
		"nginx:1.27@sha256:" + sha256Zeroes:   corev1.PullIfNotPresent,
		"":                                    corev1.PullIfNotPresent, // does not parse: validation reports it
		"Not A Valid Image!":                  corev1.PullIfNotPresent,
	}
	for image, want := range tests {
		t.Run(image, func(t *testing.T) {
			if got := defaultPullPolicy(image); got != want {
				t.Errorf("defaultPullPolicy(%q) = %s, want %s", image, got, want)
			}
		})
	}
}

const sha256Zeroes = "0000000000000000000000000000000000000000000000000000000000000000"

func TestDefaultContainer(t *testing.T) {
	tests := map[string]struct {
		in   corev1.Container
		want corev1.Container
	}{
		"bare container": {
			in:   corev1.Container{Name: "c", Image: "agent"},
			want: withContainerDefaults(corev1.Container{Name: "c", Image: "agent", ImagePullPolicy: corev1.PullAlways}),
		},
		"explicit values kept": {
			in: corev1.Container{Name: "c", Image: "agent", ImagePullPolicy: corev1.PullNever,
				TerminationMessagePath: "/tmp/x", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError},
			want: corev1.Container{Name: "c", Image: "agent", ImagePullPolicy: corev1.PullNever,
				TerminationMessagePath: "/tmp/x", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError},
		},
		"ports get TCP": {
			in: corev1.Container{Name: "c", Image: "a:1", Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9100}}},
			want: withContainerDefaults(corev1.Container{Name: "c", Image: "a:1", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9100, Protocol: corev1.ProtocolTCP}}}),
		},
		"env fieldRef and fileKeyRef": {
			in: corev1.Container{Name: "c", Image: "a:1", Env: []corev1.EnvVar{
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "F", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}},
				{Name: "PLAIN", Value: "x"},
			}},
			want: withContainerDefaults(corev1.Container{Name: "c", Image: "a:1", ImagePullPolicy: corev1.PullIfNotPresent, Env: []corev1.EnvVar{
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
				{Name: "F", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k", Optional: ptr.To(false)}}},
				{Name: "PLAIN", Value: "x"},
			}}),
		},
		"probes and lifecycle": {
			in: corev1.Container{Name: "c", Image: "a:1",
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}, PeriodSeconds: 5},
				StartupProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, FailureThreshold: 30},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop", Port: intstr.FromInt32(8080)}}},
			},
			want: withContainerDefaults(corev1.Container{Name: "c", Image: "a:1", ImagePullPolicy: corev1.PullIfNotPresent,
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Scheme: corev1.URISchemeHTTP, Port: intstr.FromInt32(8080)}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000, Service: ptr.To("")}},
					TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 30},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop", Scheme: corev1.URISchemeHTTP, Port: intstr.FromInt32(8080)}}},
			}),
		},
		"resources rounded up to milli": {
			in: corev1.Container{Name: "c", Image: "a:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")},
			}},
			want: withContainerDefaults(corev1.Container{Name: "c", Image: "a:1", ImagePullPolicy: corev1.PullIfNotPresent, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")},
			}}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []string{"containers", "initContainers", "ephemeralContainers"} {
				spec := &corev1.PodSpec{}
				switch kind {
				case "containers":
					spec.Containers = []corev1.Container{*tc.in.DeepCopy()}
				case "initContainers":
					spec.InitContainers = []corev1.Container{*tc.in.DeepCopy()}
				default:
					spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(*tc.in.DeepCopy())}}
				}
				defaultPodSpec(spec)
				var got corev1.Container
				switch kind {
				case "containers":
					got = spec.Containers[0]
				case "initContainers":
					got = spec.InitContainers[0]
				default:
					got = corev1.Container(spec.EphemeralContainers[0].EphemeralContainerCommon)
				}
				if !equality.Semantic.DeepEqual(tc.want, got) {
					t.Errorf("%s: defaulted container (-want +got):\n%s", kind, diff.Diff(tc.want, got))
				}
			}
		})
	}
}

func TestDefaultVolume(t *testing.T) {
	tests := map[string]struct {
		in   corev1.VolumeSource
		want corev1.VolumeSource
	}{
		"no source becomes emptyDir": {want: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		"hostPath type": {
			in:   corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}},
			want: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log", Type: ptr.To(corev1.HostPathUnset)}},
		},
		"secret mode": {
			in:   corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}},
			want: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o644)}},
		},
		"configMap mode kept when set": {
			in:   corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o400)}},
			want: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o400)}},
		},
		"configMap mode": {
			in:   corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}},
			want: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o644)}},
		},
		"downwardAPI mode and fieldRef": {
			in: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
			want: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644), Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}},
		},
		"projected": {
			in: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			}}},
			want: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}},
			}}},
		},
		"image volume pull policy": {
			in:   corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "models:latest"}},
			want: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "models:latest", PullPolicy: corev1.PullAlways}},
		},
		"ephemeral claim volumeMode": {
			in: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}},
			want: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem)}}}},
		},
		"iscsi, rbd, scaleIO, azureDisk": {
			in: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{}, RBD: &corev1.RBDVolumeSource{}, ScaleIO: &corev1.ScaleIOVolumeSource{}, AzureDisk: &corev1.AzureDiskVolumeSource{}},
			want: corev1.VolumeSource{
				ISCSI:   &corev1.ISCSIVolumeSource{ISCSIInterface: "default"},
				RBD:     &corev1.RBDVolumeSource{RBDPool: "rbd", RadosUser: "admin", Keyring: "/etc/ceph/keyring"},
				ScaleIO: &corev1.ScaleIOVolumeSource{StorageMode: "ThinProvisioned", FSType: "xfs"},
				AzureDisk: &corev1.AzureDiskVolumeSource{CachingMode: ptr.To(corev1.AzureDataDiskCachingReadWrite), FSType: ptr.To("ext4"),
					ReadOnly: ptr.To(false), Kind: ptr.To(corev1.AzureSharedBlobDisk)},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: *tc.in.DeepCopy()}}}
			defaultPodSpec(spec)
			if got := spec.Volumes[0].VolumeSource; !equality.Semantic.DeepEqual(tc.want, got) {
				t.Errorf("defaulted volume (-want +got):\n%s", diff.Diff(tc.want, got))
			}
		})
	}
}

// TestDefaultDaemonSetFluentd checks the canonical example as a whole: the
// defaults an apps/v1 DaemonSet gets, and that defaulting is idempotent.
func TestDefaultDaemonSetFluentd(t *testing.T) {
	ds := loadSet(t, "fluentd-elasticsearch.yaml")
	defaultDaemonSet(ds)

	want := loadSet(t, "fluentd-elasticsearch.yaml")
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	want.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}}
	want.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	spec := &want.Spec.Template.Spec
	spec.RestartPolicy, spec.DNSPolicy, spec.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	spec.SecurityContext = &corev1.PodSecurityContext{}
	spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	spec.Containers[0].TerminationMessagePath = corev1.TerminationMessagePathDefault
	spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	spec.Volumes[0].HostPath.Type = ptr.To(corev1.HostPathUnset)
	if !equality.Semantic.DeepEqual(want, ds) {
		t.Fatalf("defaulted fluentd example (-want +got):\n%s", diff.Diff(want, ds))
	}

	again := ds.DeepCopy()
	defaultDaemonSet(again)
	if !equality.Semantic.DeepEqual(ds, again) {
		t.Errorf("defaulting twice changed the set (-once +twice):\n%s", diff.Diff(ds, again))
	}
}
