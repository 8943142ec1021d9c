package main

import (
	"os"
	"strings"
	"testing"
)

const miniCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.io
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
              labels:
                additionalProperties:
                  type: string
                type: object
              policy:
                type: string
              ports:
                items:
                  properties:
                    protocol:
                      default: TCP
                      type: string
                  type: object
                type: array
            type: object
        type: object
`

func TestProcess(t *testing.T) {
	tests := map[string]struct {
		edits   []edit
		want    []string // substrings of the output
		wantErr string
	}{
		"no edits: byte for byte": {},
		"default, enum and bounds": {
			edits: []edit{
				{"policy", "default", "Always"},
				{"policy", "enum", []any{"Always"}},
				{"labels", "maxProperties", 64},
				{"labels{}", "maxLength", 63},
				{"ports[].protocol", "default", "TCP"},
			},
			want: []string{"              policy:\n                default: Always\n                enum:\n                - Always\n",
				"                additionalProperties:\n                  maxLength: 63\n", "                maxProperties: 64\n"},
		},
		"missing property":              {edits: []edit{{"ports[].name", "default", "x"}}, wantErr: `spec.ports[].name: no property "name"`},
		"items of a non-array":          {edits: []edit{{"policy[].x", "default", "x"}}, wantErr: `"policy" has no items`},
		"conflicts with controller-gen": {edits: []edit{{"ports[].protocol", "default", "UDP"}}, wantErr: "default is already TCP, not UDP"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := process([]byte(miniCRD), tc.edits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.edits) == 0 && string(out) != miniCRD {
				t.Errorf("changed without edits:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			again, err := process(out, tc.edits)
			if err != nil || string(again) != string(out) {
				t.Errorf("not idempotent: err %v\n%s", err, again)
			}
		})
	}
}

// TestEditsApplyToTheCRD runs the real table on the CRD controller-gen
// wrote (as committed, where the edits are already in: process is
// idempotent), so a path that upstream renamed fails here, not only in
// make generate.
func TestEditsApplyToTheCRD(t *testing.T) {
	data, err := os.ReadFile("../../charts/everynode/crds/everynode.io_daemonsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := process(data, edits())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(data) {
		t.Error("the committed CRD lacks edits: run make generate")
	}
}
