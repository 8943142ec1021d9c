package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PartitionPolicy cuts nodes off from the API server as a network
// partition would cut their kubelets off: a ValidatingAdmissionPolicy
// (and its binding, both named name) that refuses what only a kubelet
// (here kwok) writes for those nodes: the node's Lease renewals, node
// statuses that say Ready, pod statuses on the nodes that say Ready, and
// the final delete of a terminating pod there (a kubelet confirms a pod
// is gone; without one, it stays Terminating). kube-controller-manager's
// own writes (Ready Unknown, the taints, pods not Ready) get through.
// Deleting the two heals the partition.
func PartitionPolicy(name string, nodes []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = strconv.Quote(n)
	}
	readyTrue := "exists(c, c.type == 'Ready' && c.status == 'True')"
	rule := func(op admissionv1.OperationType, group string, resources ...string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{op},
			Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources}}}
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			// Ignore: a policy error must never break the cluster; a
			// partition that does not hold shows as nodes staying Ready.
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule(admissionv1.Update, "coordination.k8s.io", "leases"),
				rule(admissionv1.Update, "", "nodes/status", "pods/status"),
				rule(admissionv1.Delete, "", "pods"),
			}},
			Variables: []admissionv1.Variable{{Name: "nodes", Expression: "[" + strings.Join(quoted, ", ") + "]"}},
			Validations: []admissionv1.Validation{
				{Expression: "request.resource.resource != 'leases' || !(object.metadata.name in variables.nodes)", Message: "partitioned: lease renewal"},
				{Expression: "request.resource.resource != 'nodes' || !(object.metadata.name in variables.nodes) || !has(object.status.conditions) || !object.status.conditions." + readyTrue, Message: "partitioned: node heartbeat"},
				{Expression: "request.resource.resource != 'pods' || request.operation != 'UPDATE' || !has(object.spec.nodeName) || !(object.spec.nodeName in variables.nodes) || !has(object.status.conditions) || !object.status.conditions." + readyTrue, Message: "partitioned: pod status"},
				{Expression: "request.resource.resource != 'pods' || request.operation != 'DELETE' || !has(oldObject.spec.nodeName) || !(oldObject.spec.nodeName in variables.nodes) || !has(oldObject.metadata.deletionTimestamp)", Message: "partitioned: pod deletion confirmed"},
			},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	return policy, binding
}

// ResyncAnnotation is the annotation ResyncPods sets on a healed node's
// pods, with the time.
const ResyncAnnotation = "e2e.everynode.io/kubelet-resync"

// ResyncPods plays what a kubelet does once its partition heals: it
// reports again the pod statuses the API server refused meanwhile (its
// status manager retries them and resyncs every pod). kwok does not: a
// Stage whose status write was refused is not tried again until the pod
// changes, so a pod that was to turn Ready stays not Ready, and one
// created on the node during the partition stays Pending, for good (the
// soak's smoke saw both, minutes after the heal). ResyncPods gives each
// pod on nodes such a change, an annotation, so kwok runs its Stages on
// it again. Call it once the partition's policy is deleted; the API
// server takes a moment to stop enforcing it, so it runs twice: after
// the given wait, and 5 s later.
func ResyncPods(ctx context.Context, kube kubernetes.Interface, nodes []string, after time.Duration) error {
	var errs []error
	for _, wait := range []time.Duration{after, 5 * time.Second} {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		errs = errs[:0]
		for _, node := range nodes {
			pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				errs = append(errs, fmt.Errorf("list the pods of node %s: %w", node, err))
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, ResyncAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
			for _, p := range pods.Items {
				_, err := kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("resync pod %s/%s: %w", p.Namespace, p.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
