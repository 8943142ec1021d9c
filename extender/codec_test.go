package extender

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"everynode.io/everynode/placement"
)

func TestDecodeArgs(t *testing.T) {
	daemon := `{"metadata":{"name":"a","labels":{"everynode.io/daemon-pod":"true"}}}`
	tests := map[string]struct {
		body       string
		wantErr    bool
		wantPod    bool
		wantDaemon bool
		wantApps   bool     // a pod of a built-in apps DaemonSet
		wantNames  []string // nil: NodeNames absent or null
	}{
		"apps daemon pod":             {body: `{"Pod":{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"kube-proxy","uid":"u","controller":true}]}}}`, wantPod: true, wantApps: true},
		"apps daemon pod, escaped":    {body: `{"Pod":{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","KIND":"Daemon\u0053et","name":"p","uid":"u","controller":true}]}}}`, wantPod: true, wantApps: true},
		"apps daemon, not controller": {body: `{"Pod":{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"p","uid":"u"}]}}}`, wantPod: true},
		"ReplicaSet pod":              {body: `{"Pod":{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"p","uid":"u","controller":true}]}}}`, wantPod: true},
		"other group DaemonSet":       {body: `{"Pod":{"metadata":{"ownerReferences":[{"apiVersion":"example.com/v1","kind":"DaemonSet","name":"p","uid":"u","controller":true}]}}}`, wantPod: true},
		"names":                       {body: `{"Pod":{},"NodeNames":["a","b"]}`, wantPod: true, wantNames: []string{"a", "b"}},
		"whitespace everywhere":       {body: " \n{ \"Pod\" : { } ,\t\"NodeNames\" : [ \"a\" , \"b\" ] }\r\n", wantPod: true, wantNames: []string{"a", "b"}},
		"empty names":                 {body: `{"Pod":{},"NodeNames":[]}`, wantPod: true, wantNames: []string{}},
		"null names":                  {body: `{"Pod":{},"NodeNames":null}`, wantPod: true},
		"null name is empty":          {body: `{"Pod":{},"NodeNames":["a",null]}`, wantPod: true, wantNames: []string{"a", ""}},
		"escaped name":                {body: `{"Pod":{},"NodeNames":["n\u00e9","a\"b","c\/d"]}`, wantPod: true, wantNames: []string{"né", `a"b`, "c/d"}},
		"key case folded":             {body: `{"pod":{},"nodenames":["a"]}`, wantPod: true, wantNames: []string{"a"}},
		"key escaped":                 {body: `{"P\u006fd":{},"NodeNames":["a"]}`, wantPod: true, wantNames: []string{"a"}},
		"unknown keys skipped":        {body: `{"x":[1,-2.5e+3,true,false,null,{"y":"z"}],"Pod":{}}`, wantPod: true},
		"daemon pod":                  {body: `{"Pod":` + daemon + `,"NodeNames":["a"]}`, wantPod: true, wantDaemon: true, wantNames: []string{"a"}},
		"daemon label folded key":     {body: `{"Pod":{"METADATA":{"Labels":{"everynode.io/daemon-pod":"true"}}}}`, wantPod: true, wantDaemon: true},
		"daemon label escaped":        {body: `{"Pod":{"metadata":{"labels":{"everynode.io\/daemon-pod":"true"}}}}`, wantPod: true, wantDaemon: true},
		"daemon label false":          {body: `{"Pod":{"metadata":{"labels":{"everynode.io/daemon-pod":"false"}}}}`, wantPod: true},
		"label elsewhere":             {body: `{"Pod":{"spec":{"nodeSelector":{"everynode.io/daemon-pod":"true"}}}}`, wantPod: true},
		"duplicate pods merge":        {body: `{"Pod":` + daemon + `,"Pod":{"metadata":{"name":"b"}}}`, wantPod: true, wantDaemon: true},
		"duplicate pod nulled":        {body: `{"Pod":` + daemon + `,"Pod":null}`},
		"nodes":                       {body: `{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a"}}]}}`, wantPod: true},
		"null":                        {body: `null`},
		"no pod":                      {body: `{"NodeNames":["a"]}`, wantNames: []string{"a"}},
		"null pod":                    {body: `{"Pod":null}`},
		"daemon pod type error":       {body: `{"Pod":{"metadata":{"labels":{"everynode.io/daemon-pod":1}}}}`, wantErr: true},
		"pod not an object":           {body: `{"Pod":[]}`, wantErr: true},
		"names not an array":          {body: `{"Pod":{},"NodeNames":"a"}`, wantErr: true},
		"name not a string":           {body: `{"Pod":{},"NodeNames":[1]}`, wantErr: true},
		"nodes type error":            {body: `{"Pod":{},"Nodes":{"items":5}}`, wantErr: true},
		"array":                       {body: `[]`, wantErr: true},
		"empty":                       {body: ``, wantErr: true},
		"truncated":                   {body: `{"Pod":{},"NodeNames":["a"`, wantErr: true},
		"trailing comma":              {body: `{"Pod":{},}`, wantErr: true},
		"trailing data":               {body: `{"Pod":{}} {}`, wantErr: true},
		"bad escape":                  {body: `{"Pod":{},"NodeNames":["\x"]}`, wantErr: true},
		"short unicode escape":        {body: `{"Pod":{},"NodeNames":["\u12"]}`, wantErr: true},
		"control character":           {body: "{\"Pod\":{},\"NodeNames\":[\"a\tb\"]}", wantErr: true},
		"bad number":                  {body: `{"x":01,"Pod":{}}`, wantErr: true},
		"bad literal":                 {body: `{"x":nul,"Pod":{}}`, wantErr: true},
		"too deep":                    {body: `{"x":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, wantErr: true},
		"deep enough":                 {body: `{"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `,"Pod":{}}`, wantPod: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := decodeArgs([]byte(tc.body))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.hasPod != tc.wantPod || (got.daemonPod != nil) != tc.wantDaemon || got.builtinDaemon != tc.wantApps {
				t.Errorf("hasPod %v daemon %v apps daemon %v, want %v %v %v", got.hasPod, got.daemonPod != nil, got.builtinDaemon, tc.wantPod, tc.wantDaemon, tc.wantApps)
			}
			if (got.names == nil) != (tc.wantNames == nil) || (got.names != nil && !slices.Equal(*got.names, tc.wantNames)) {
				t.Errorf("names = %v, want %q", got.names, tc.wantNames)
			}
			checkAgainstEncodingJSON(t, []byte(tc.body))
		})
	}
}

// readArgs is ExtenderArgs cut down to what the verbs read, as
// encoding/json decodes it: the reference decodeArgs is held to. Of a pod,
// only the metadata is ever read (the rest is checked for syntax only).
type readArgs struct {
	Pod *struct {
		ObjectMeta metav1.ObjectMeta `json:"metadata"`
	}
	Nodes     *corev1.NodeList
	NodeNames *[]string
}

// checkAgainstEncodingJSON fails unless decodeArgs agrees with
// encoding/json on body. The one leniency allowed: an ordinary pod is not
// decoded, so a type error inside it may pass where encoding/json fails.
func checkAgainstEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	got, err := decodeArgs(body)
	var ref readArgs
	refErr := json.Unmarshal(body, &ref)
	if refErr != nil {
		if err == nil && (!json.Valid(body) || got.daemonPod != nil || got.builtinDaemon) {
			t.Fatalf("decodeArgs accepted %q, encoding/json: %v", body, refErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("decodeArgs rejected %q (%v), encoding/json accepted it", body, err)
	}
	if got.hasPod != (ref.Pod != nil) {
		t.Fatalf("hasPod %v, encoding/json pod %v", got.hasPod, ref.Pod)
	}
	var refPod *corev1.Pod
	if ref.Pod != nil {
		refPod = &corev1.Pod{ObjectMeta: ref.Pod.ObjectMeta}
	}
	if wantDaemon := refPod != nil && placement.IsDaemonPod(refPod); wantDaemon != (got.daemonPod != nil) {
		t.Fatalf("daemon %v, encoding/json says %v", got.daemonPod != nil, wantDaemon)
	}
	if wantApps := refPod != nil && !placement.IsDaemonPod(refPod) && placement.IsBuiltinDaemonPod(refPod); wantApps != got.builtinDaemon {
		t.Fatalf("apps daemon %v, encoding/json says %v", got.builtinDaemon, wantApps)
	}
	if got.daemonPod != nil && !apiequality.Semantic.DeepEqual(got.daemonPod.ObjectMeta, refPod.ObjectMeta) {
		t.Fatalf("daemon pod metadata differs from encoding/json's")
	}
	if (got.names == nil) != (ref.NodeNames == nil) || (got.names != nil && !slices.Equal(*got.names, *ref.NodeNames)) {
		t.Fatalf("names %v, encoding/json %v", got.names, ref.NodeNames)
	}
	if !apiequality.Semantic.DeepEqual(got.nodes, ref.Nodes) {
		t.Fatalf("nodes differ from encoding/json's")
	}
}

// FuzzDecodeArgs holds the hand-written decoder to encoding/json.
func FuzzDecodeArgs(f *testing.F) {
	fuzzSeeds(f, false)
	for _, s := range []string{
		`{"Pod":{},"NodeNames":["n\u00e9","a\"b"]}`, `{"pod":{"METADATA":{"labels":{"everynode.io/daemon-pod":"true"}}}}`,
		`{"x":[1,-2.5e+3,true,false,null],"Pod":{}}`, `{"Pod":{},"Pod":null}`, "{\"Pod\":{},\"NodeNames\":[\"\xc3\"]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstEncodingJSON(t, body)
	})
}

func TestEncodeFilterResult(t *testing.T) {
	tests := map[string]*extenderv1.ExtenderFilterResult{
		"empty":        {NodeNames: &[]string{}},
		"nil names":    {},
		"names":        {NodeNames: &[]string{"a", "b"}, FailedNodes: map[string]string{"c": "why"}, FailedAndUnresolvableNodes: map[string]string{"c": "why"}},
		"escaping":     {NodeNames: &[]string{"a\"b", "é", "\x01", "<&>", "\xff"}, Error: "bad\n"},
		"nodes":        {Nodes: &corev1.NodeList{Items: []corev1.Node{*node("n0", nil)}}},
		"empty failed": {NodeNames: &[]string{"a"}, FailedNodes: map[string]string{}},
	}
	for name, res := range tests {
		t.Run(name, func(t *testing.T) {
			checkEncodeFilterResult(t, res)
		})
	}
}

// checkEncodeFilterResult fails unless encodeFilterResult's output decodes
// to what encoding/json's own output decodes to.
func checkEncodeFilterResult(t *testing.T, res *extenderv1.ExtenderFilterResult) {
	t.Helper()
	var buf bytes.Buffer
	if err := encodeFilterResult(&buf, res, nameText{}); err != nil {
		t.Fatal(err)
	}
	var got, want extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("output %q is not JSON: %v", buf.String(), err)
	}
	ref, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("decodes to %+v, encoding/json's to %+v", got, want)
	}
}

// FuzzEncodeFilterResult holds the hand-written encoder to encoding/json.
func FuzzEncodeFilterResult(f *testing.F) {
	f.Add("node-1", "why", "")
	f.Add("a\"b\\c", "\xff\x00<", "err\u2028")
	f.Fuzz(func(t *testing.T, name, reason, errText string) {
		failed := map[string]string{name + "x": reason}
		checkEncodeFilterResult(t, &extenderv1.ExtenderFilterResult{
			NodeNames: &[]string{name, reason}, FailedNodes: failed, FailedAndUnresolvableNodes: maps.Clone(failed), Error: errText,
		})
	})
}

// TestHasSpecial checks the eight-bytes-at-a-time test against the byte
// table, for every byte value at every position.
func TestHasSpecial(t *testing.T) {
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			word := []byte("abcdefgh")
			word[pos] = byte(c)
			if got, want := hasSpecial(load64(string(word), 0)), !plain[c]; got != want {
				t.Fatalf("byte %#x at %d: hasSpecial = %v, want %v", c, pos, got, want)
			}
		}
	}
	// A special byte next to any other must still be seen.
	for c := 0; c < 256; c++ {
		for _, special := range []byte{'"', '\\', 0, 0x1f, 0x80, 0xff} {
			word := []byte{byte(c), special, byte(c), byte(c), byte(c), byte(c), byte(c), byte(c)}
			if !hasSpecial(load64(string(word), 0)) {
				t.Fatalf("missed %#x after %#x", special, c)
			}
		}
	}
}
