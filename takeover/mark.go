package takeover

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// unmarkedSelector finds, server-side, the pods that may be an apps/v1
// DaemonSet's and lack the daemon-pod label: every DaemonSet pod carries
// the revision hash label (so do StatefulSet pods, which the owner check
// leaves out).
var unmarkedSelector = "controller-revision-hash,!" + everynodev1alpha1.LabelDaemonPod

// MarkPods gives the daemon-pod label to every pod an apps/v1 DaemonSet
// controls that lacks it: the pods kube-controller-manager made before the
// takeover. everynode reads only labelled pods (its pod informer selects
// on the label, to stay small on big clusters), so until they are marked
// the takeover controller would see their nodes as empty and start a
// second pod on each. It costs one patch per such pod, once: the label
// stays. It returns how many it marked; on an error some may be left, and
// the takeover must not start.
func MarkPods(ctx context.Context, client kubernetes.Interface) (int, error) {
	logger := klog.FromContext(ctx)
	marked, cont := 0, ""
	last := time.Now()
	for {
		list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			LabelSelector: unmarkedSelector, Limit: 500, Continue: cont,
		})
		if err != nil {
			return marked, fmt.Errorf("list the pods of apps/v1 DaemonSets: %w", err)
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if !needsMark(pod) {
				continue
			}
			_, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, placement.MarkPatch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				continue // gone meanwhile
			}
			if err != nil {
				return marked, fmt.Errorf("mark pod %s/%s of an apps/v1 DaemonSet: %w", pod.Namespace, pod.Name, err)
			}
			marked++
			if time.Since(last) > 10*time.Second {
				logger.Info("Marking the pods of apps/v1 DaemonSets for the takeover", "marked", marked)
				last = time.Now()
			}
		}
		if cont = list.Continue; cont == "" {
			return marked, nil
		}
	}
}

// needsMark reports whether pod is an apps/v1 DaemonSet's and unmarked.
func needsMark(pod *corev1.Pod) bool {
	return placement.AppsControllerRef(pod) != nil && !placement.IsDaemonPod(pod)
}
