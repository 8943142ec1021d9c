package cluster

import (
	"strings"
	"testing"
)

func TestPartitionPolicy(t *testing.T) {
	p, b := PartitionPolicy("soak-partition-61", []string{"soak-0001", "soak-0007"})
	if p.Name != b.Name || b.Spec.PolicyName != p.Name {
		t.Errorf("binding %q of policy %q", b.Spec.PolicyName, p.Name)
	}
	if got := p.Spec.Variables[0].Expression; got != `["soak-0001", "soak-0007"]` {
		t.Errorf("nodes variable %s", got)
	}
	if len(p.Spec.Validations) != 4 || !strings.Contains(p.Spec.Validations[0].Expression, "leases") {
		t.Errorf("validations %+v", p.Spec.Validations)
	}
}
