package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The variants go into unstructured objects, which take int64, not int:
// a plain 0 panics in DeepCopy.
func TestInPlaceVariantsAreUnstructured(t *testing.T) {
	for _, v := range inPlaceVariants {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if err := unstructured.SetNestedMap(u.Object, map[string]any{"rollingUpdate": v.rollingUpdate}, "spec"); err != nil {
			t.Fatal(err)
		}
		_ = u.DeepCopy()
	}
}

// The one-pod-at-a-time variants run only when named, and each compares
// with its own upstream baseline.
func TestSelectedVariants(t *testing.T) {
	all, err := selectedVariants("")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, v := range all {
		keys = append(keys, v.key)
	}
	if got := strings.Join(keys, ","); got != "upstream,gate,nogate" {
		t.Errorf("default variants %s, want upstream,gate,nogate", got)
	}
	step, err := selectedVariants("upstream-1,recreate-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(step) != 2 || step[1].baseName() != step[0].name || step[1].pods(1000) != stepPods || all[2].pods(1000) != 1000 {
		t.Errorf("maxUnavailable-1 variants %+v: want recreate-1 against upstream-1, timed over %d of 1,000 nodes", step, stepPods)
	}
	if all[2].baseName() != all[0].name {
		t.Errorf("nogate's base %q, want %q", all[2].baseName(), all[0].name)
	}
	if _, err := selectedVariants("upstream,bogus"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an unknown variant: error %v", err)
	}
}
