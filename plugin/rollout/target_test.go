package rollout

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	tests := map[string]struct {
		arg, want, wantErr string
	}{
		"bare name":          {arg: "fluentd", want: "fluentd"},
		"kubectl habit":      {arg: "daemonset/fluentd", want: "fluentd"},
		"short name":         {arg: "eds/fluentd", want: "fluentd"},
		"qualified, cased":   {arg: "DaemonSets.everynode.io/fluentd", want: "fluentd"},
		"with version":       {arg: "daemonset.v1alpha1.everynode.io/fluentd", want: "fluentd"},
		"another kind":       {arg: "deployment/fluentd", wantErr: `resource type "deployment" is not supported`},
		"no name after type": {arg: "daemonset/", wantErr: "invalid resource name"},
		"two slashes":        {arg: "daemonset/a/b", wantErr: "invalid resource name"},
		"empty":              {arg: "", wantErr: "empty resource name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseName(tc.arg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseName(%q) = %q, %v; want %q", tc.arg, got, err, tc.want)
			}
		})
	}
}

func TestTargetValidate(t *testing.T) {
	tests := map[string]struct {
		flags   targetFlags
		args    []string
		wantErr string
	}{
		"a name":               {args: []string{"a"}},
		"names":                {args: []string{"a", "daemonset/b"}},
		"a selector":           {flags: targetFlags{selector: "tier=node"}},
		"everywhere":           {flags: targetFlags{selector: "tier=node", allNamespaces: true}},
		"nothing":              {wantErr: "required resource not specified"},
		"names and a selector": {flags: targetFlags{selector: "a=b"}, args: []string{"a"}, wantErr: "not both"},
		"names everywhere":     {flags: targetFlags{allNamespaces: true}, args: []string{"a"}, wantErr: "across all namespaces"},
		"bad selector":         {flags: targetFlags{selector: "a in (b"}, wantErr: "invalid selector"},
		"bad name":             {args: []string{"pod/a"}, wantErr: "not supported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.flags.validate(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
