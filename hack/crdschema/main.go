// Command crdschema writes into the generated everynode CRD what
// controller-gen cannot put there: the defaults, enums and size bounds of
// fields that belong to upstream types (the pod template's corev1 types,
// metav1.LabelSelector), which take no markers of ours.
//
// The defaults are the unconditional ones of upstream's apps/v1 and core/v1
// defaulting (what webhook/daemonset_defaults.go applies where the field is
// absent), so a set in a namespace the webhooks skip is stored as apps/v1
// would store it. The bounds let the API server's CEL cost estimator accept
// the rules on the selector and the template's labels; each is far above
// what a real object holds.
//
// Usage: crdschema FILE... (rewrites each file in place). It fails when a
// path it edits is missing, so an upstream rename cannot drop a default
// silently, or when controller-gen already wrote a different value there.
package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// edit sets key to value in the schema of the field at path, relative to
// the spec of every version's openAPIV3Schema. A path is dot-separated
// property names; a name ending in [] steps into the items of that array,
// one ending in {} into the values of that map.
type edit struct {
	path  string
	key   string
	value any
}

// Bounds: the smallest that no real object comes near, documented here once.
const (
	// maxLabels bounds selector.matchLabels, template.metadata.labels and
	// selector.matchExpressions: a selector of 64 terms or a pod with more
	// than 64 labels is far beyond what any manifest we know has (label
	// keys are at most 317 bytes, values 63, so 64 labels already are
	// ~24 KiB of a pod's 256 KiB label-and-annotation budget).
	maxLabels = 64
	// maxSelectorValues bounds matchExpressions[].values.
	maxSelectorValues = 64
	// maxLabelKeyLength is upstream's longest label key: a 253-byte DNS
	// prefix, a slash and a 63-byte name. Label values are at most 63.
	maxLabelKeyLength   = 317
	maxLabelValueLength = 63
)

// edits is the whole table. The template's defaults follow
// webhook/daemonset_defaults.go (upstream SetDefaults_PodSpec and the
// generated per-field defaults); what depends on another field
// (imagePullPolicy on the image tag, emptyDir when a volume has no source,
// serviceAccount aliasing, resource rounding) stays in the webhook.
func edits() []edit {
	const pod = "template.spec."
	es := []edit{
		{pod + "restartPolicy", "default", "Always"},
		// The only value a DaemonSet allows. Not an enum, though that would
		// word the error as the webhook does ("Unsupported value"): the API
		// server treats an enum violation as blocking, skips every CEL rule
		// and adds a cause without a field ("some validation rules were not
		// checked"). A rule on the field itself prints the value as the
		// webhook does: Invalid value: "Never": supported values: "Always".
		{pod + "restartPolicy", "x-kubernetes-validations", []any{map[string]any{
			"rule": "self == 'Always'", "message": `supported values: "Always"`}}},
		{pod + "dnsPolicy", "default", "ClusterFirst"},
		{pod + "schedulerName", "default", "default-scheduler"},
		{pod + "terminationGracePeriodSeconds", "default", 30},
		{pod + "securityContext", "default", map[string]any{}},

		{pod + "volumes[].hostPath.type", "default", ""},
		{pod + "volumes[].secret.defaultMode", "default", 420},
		{pod + "volumes[].configMap.defaultMode", "default", 420},
		{pod + "volumes[].downwardAPI.defaultMode", "default", 420},
		{pod + "volumes[].downwardAPI.items[].fieldRef.apiVersion", "default", "v1"},
		{pod + "volumes[].projected.defaultMode", "default", 420},
		{pod + "volumes[].projected.sources[].downwardAPI.items[].fieldRef.apiVersion", "default", "v1"},
		{pod + "volumes[].projected.sources[].serviceAccountToken.expirationSeconds", "default", 3600},
		{pod + "volumes[].iscsi.iscsiInterface", "default", "default"},
		{pod + "volumes[].rbd.pool", "default", "rbd"},
		{pod + "volumes[].rbd.user", "default", "admin"},
		{pod + "volumes[].rbd.keyring", "default", "/etc/ceph/keyring"},
		{pod + "volumes[].azureDisk.cachingMode", "default", "ReadWrite"},
		{pod + "volumes[].azureDisk.fsType", "default", "ext4"},
		{pod + "volumes[].azureDisk.readOnly", "default", false},
		{pod + "volumes[].azureDisk.kind", "default", "Shared"},
		{pod + "volumes[].scaleIO.storageMode", "default", "ThinProvisioned"},
		{pod + "volumes[].scaleIO.fsType", "default", "xfs"},
		{pod + "volumes[].ephemeral.volumeClaimTemplate.spec.volumeMode", "default", "Filesystem"},

		// CEL cost bounds of the selector rules (see the constants).
		{"selector.matchLabels", "maxProperties", maxLabels},
		{"selector.matchLabels{}", "maxLength", maxLabelValueLength},
		{"selector.matchExpressions", "maxItems", maxLabels},
		{"selector.matchExpressions[].key", "maxLength", maxLabelKeyLength},
		{"selector.matchExpressions[].values", "maxItems", maxSelectorValues},
		{"selector.matchExpressions[].values[]", "maxLength", maxLabelValueLength},
		{"template.metadata.labels", "maxProperties", maxLabels},
		{"template.metadata.labels{}", "maxLength", maxLabelValueLength},
	}
	for _, c := range []string{"containers[]", "initContainers[]", "ephemeralContainers[]"} {
		c = pod + c + "."
		es = append(es,
			edit{c + "terminationMessagePath", "default", "/dev/termination-log"},
			edit{c + "terminationMessagePolicy", "default", "File"},
			edit{c + "ports[].protocol", "default", "TCP"},
			edit{c + "env[].valueFrom.fieldRef.apiVersion", "default", "v1"},
			edit{c + "env[].valueFrom.fileKeyRef.optional", "default", false},
		)
		for _, p := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			p = c + p + "."
			es = append(es,
				edit{p + "timeoutSeconds", "default", 1},
				edit{p + "periodSeconds", "default", 10},
				edit{p + "successThreshold", "default", 1},
				edit{p + "failureThreshold", "default", 3},
				edit{p + "httpGet.path", "default", "/"},
				edit{p + "httpGet.scheme", "default", "HTTP"},
				edit{p + "grpc.service", "default", ""},
			)
		}
		for _, h := range []string{"postStart", "preStop"} {
			h = c + "lifecycle." + h + ".httpGet."
			es = append(es, edit{h + "path", "default", "/"}, edit{h + "scheme", "default", "HTTP"})
		}
	}
	return es
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdschema CRD.yaml...")
		os.Exit(2)
	}
	for _, name := range os.Args[1:] {
		if err := rewrite(name); err != nil {
			fmt.Fprintf(os.Stderr, "crdschema: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

func rewrite(name string) error {
	in, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	out, err := process(in, edits())
	if err != nil {
		return err
	}
	return os.WriteFile(name, out, 0o644)
}

// process applies es to the spec schema of every version of the CRD in
// data. A generic map keeps controller-gen's layout: both sort keys, so a
// CRD without edits comes out byte for byte as it went in.
func process(data []byte, es []edit) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return nil, fmt.Errorf("no spec.versions")
	}
	for _, v := range versions {
		spec, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec").(map[string]any)
		if !ok {
			return nil, fmt.Errorf("version %v: no openAPIV3Schema.properties.spec", dig(v, "name"))
		}
		for _, e := range es {
			if err := apply(spec, e); err != nil {
				return nil, fmt.Errorf("version %v: spec.%s: %w", dig(v, "name"), e.path, err)
			}
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if bytes.HasPrefix(data, []byte("---\n")) {
		buf.WriteString("---\n")
	}
	buf.Write(out)
	return buf.Bytes(), nil
}

func apply(schema map[string]any, e edit) error {
	node := schema
	for _, step := range strings.Split(e.path, ".") {
		name, sub := step, ""
		if s, ok := strings.CutSuffix(step, "[]"); ok {
			name, sub = s, "items"
		} else if s, ok := strings.CutSuffix(step, "{}"); ok {
			name, sub = s, "additionalProperties"
		}
		next, ok := dig(node, "properties", name).(map[string]any)
		if !ok {
			return fmt.Errorf("no property %q", name)
		}
		if sub != "" {
			if next, ok = next[sub].(map[string]any); !ok {
				return fmt.Errorf("%q has no %s", name, sub)
			}
		}
		node = next
	}
	// Compare as JSON would: the file's numbers decode as float64.
	want, err := normalize(e.value)
	if err != nil {
		return err
	}
	if have, ok := node[e.key]; ok && !reflect.DeepEqual(have, want) {
		return fmt.Errorf("%s is already %v, not %v", e.key, have, want)
	}
	node[e.key] = want
	return nil
}

func normalize(v any) (any, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, yaml.Unmarshal(b, &out)
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
