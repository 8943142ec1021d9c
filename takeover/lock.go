package takeover

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Lock makes a second DaemonSet controller unable to write, rather than
// merely seen: the chart's ValidatingAdmissionPolicy (named Policy) denies
// every write of apps/v1 DaemonSets, their ControllerRevisions and pods by
// the identities kube-controller-manager's DaemonSet controller runs as
// (system:serviceaccount:kube-system:daemon-set-controller with
// --use-service-account-credentials, kubeadm's default), except what
// answering the probe takes. The policy does nothing until it is bound;
// Acquire binds it and Release unbinds it, so it holds exactly while
// everynode reconciles apps/v1 DaemonSets (Runner).
//
// The binding is owned by the policy: uninstalling the chart or turning
// the takeover off removes the policy, and the garbage collector the
// binding with it, whatever state a replica left it in. A replica that
// stops while it holds the lock leaves the binding in place for the next
// leader, which either runs on under it or, if another controller now
// answers the probe, releases it.
type Lock struct {
	Client kubernetes.Interface
	// Policy names the ValidatingAdmissionPolicy, and the binding after it.
	Policy string
}

// Acquire binds the policy (or finds it bound already).
func (l *Lock) Acquire(ctx context.Context) error {
	bindings := l.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	policy, err := l.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, l.Policy, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the takeover lock's ValidatingAdmissionPolicy %s does not exist: the chart installs it with takeover.enabled "+
				"(or run with --takeover-lock-policy= to take over without a lock)", l.Policy)
		}
		return fmt.Errorf("get the takeover lock's ValidatingAdmissionPolicy %s: %w", l.Policy, err)
	}
	_, err = bindings.Create(ctx, lockBinding(policy), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, getErr := bindings.Get(ctx, l.Policy, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("get the takeover lock's binding %s: %w", l.Policy, getErr)
		}
		if cur.Spec.PolicyName != l.Policy {
			return fmt.Errorf("the ValidatingAdmissionPolicyBinding %s binds policy %q, not the takeover lock: delete it", l.Policy, cur.Spec.PolicyName)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("bind the takeover lock %s: %w", l.Policy, err)
	}
	return nil
}

// Release unbinds the policy (or finds it unbound already).
func (l *Lock) Release(ctx context.Context) error {
	err := l.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, l.Policy, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unbind the takeover lock %s: %w", l.Policy, err)
	}
	return nil
}

// lockBinding binds policy with Deny, owned by it.
func lockBinding(policy *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name: policy.Name,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "everynode",
			},
			Annotations: map[string]string{
				"everynode.io/purpose": "everynode --takeover binds this while it reconciles apps/v1 DaemonSets, so kube-controller-manager's " +
					"DaemonSet controller cannot write them too; it unbinds it when it stops taking over.",
			},
			// No blockOwnerDeletion: that needs update on the policy's
			// finalizers, and nothing waits for the binding to go.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: admissionregistrationv1.SchemeGroupVersion.String(),
				Kind:       "ValidatingAdmissionPolicy",
				Name:       policy.Name,
				UID:        policy.UID,
			}},
		},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}
