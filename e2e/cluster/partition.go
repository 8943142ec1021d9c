package cluster

import (
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
