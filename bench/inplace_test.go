package main

import (
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
