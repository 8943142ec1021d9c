package codec

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
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
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
	for dname, decode := range decoders {
		for name, tc := range tests {
			t.Run(dname+"/"+name, func(t *testing.T) {
				got, err := decode([]byte(tc.body))
				if (err != nil) != tc.wantErr {
					t.Fatalf("err = %v, want error %v", err, tc.wantErr)
				}
				if err != nil {
					return
				}
				daemon, apps := kinds(got.Pod)
				if got.HasPod != tc.wantPod || daemon != tc.wantDaemon || apps != tc.wantApps {
					t.Errorf("hasPod %v daemon %v apps daemon %v, want %v %v %v", got.HasPod, daemon, apps, tc.wantPod, tc.wantDaemon, tc.wantApps)
				}
				if (got.Names == nil) != (tc.wantNames == nil) || (got.Names != nil && !slices.Equal(*got.Names, tc.wantNames)) {
					t.Errorf("names = %v, want %q", got.Names, tc.wantNames)
				}
				checkAgainstEncodingJSON(t, []byte(tc.body))
			})
		}
	}
}

// decoders are the decoders held to encoding/json: the codec's, and with
// GOEXPERIMENT=jsonv2 one on encoding/json/jsontext (jsontext_test.go).
var decoders = map[string]func([]byte) (Args, error){"codec": decodeArgs}

// kinds says whether a decoded pod is an everynode daemon pod or a pod of a
// built-in apps DaemonSet, the two kinds the extender reads.
func kinds(pod *corev1.Pod) (daemon, apps bool) {
	if pod == nil {
		return false, false
	}
	daemon = placement.IsDaemonPod(pod)
	return daemon, !daemon && placement.IsBuiltinDaemonPod(pod)
}

// readArgs is ExtenderArgs cut down to what the verbs read, as
// encoding/json decodes it: the reference the decoders are held to. Of a pod,
// only the metadata is ever read (the rest is checked for syntax only).
type readArgs struct {
	Pod *struct {
		ObjectMeta metav1.ObjectMeta `json:"metadata"`
	}
	Nodes     *corev1.NodeList
	NodeNames *[]string
}

// checkAgainstEncodingJSON fails unless every decoder in decoders agrees
// with encoding/json on body. The one leniency allowed: an ordinary pod is not
// decoded, so a type error inside it may pass where encoding/json fails.
func checkAgainstEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	for name, decode := range decoders {
		checkDecoder(t, name, decode, body)
	}
}

func checkDecoder(t *testing.T, name string, decode func([]byte) (Args, error), body []byte) {
	t.Helper()
	got, err := decode(body)
	defer got.release()
	daemon, apps := kinds(got.Pod)
	var ref readArgs
	refErr := json.Unmarshal(body, &ref)
	if refErr != nil {
		if err == nil && (!json.Valid(body) || daemon || apps) {
			t.Fatalf("%s accepted %q, encoding/json: %v", name, body, refErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s rejected %q (%v), encoding/json accepted it", name, body, err)
	}
	if got.HasPod != (ref.Pod != nil) {
		t.Fatalf("hasPod %v, encoding/json pod %v", got.HasPod, ref.Pod)
	}
	var refPod *corev1.Pod
	if ref.Pod != nil {
		refPod = &corev1.Pod{ObjectMeta: ref.Pod.ObjectMeta}
	}
	if wantDaemon, wantApps := kinds(refPod); wantDaemon != daemon || wantApps != apps {
		t.Fatalf("daemon %v, apps daemon %v; encoding/json says %v, %v", daemon, apps, wantDaemon, wantApps)
	}
	if got.Pod != nil && !apiequality.Semantic.DeepEqual(got.Pod.ObjectMeta, refPod.ObjectMeta) {
		t.Fatalf("pod metadata differs from encoding/json's")
	}
	if (got.Names == nil) != (ref.NodeNames == nil) || (got.Names != nil && !slices.Equal(*got.Names, *ref.NodeNames)) {
		t.Fatalf("names %v, encoding/json %v", got.Names, ref.NodeNames)
	}
	if got.namesRaw != "" {
		var raw []string
		if err := json.Unmarshal([]byte(got.namesRaw), &raw); err != nil || !slices.Equal(raw, *got.Names) {
			t.Fatalf("namesRaw %q does not decode to the names (%v)", got.namesRaw, err)
		}
	}
	if !apiequality.Semantic.DeepEqual(got.Nodes, ref.Nodes) {
		t.Fatalf("nodes differ from encoding/json's")
	}
}

// FuzzDecodeArgs holds the decoders to encoding/json.
func FuzzDecodeArgs(f *testing.F) {
	for _, seed := range seeds(f) {
		f.Add(seed)
	}
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
		"nodes":        {Nodes: &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"a": "b"}}}}}},
		"empty failed": {NodeNames: &[]string{"a"}, FailedNodes: map[string]string{}},
	}
	for name, res := range tests {
		t.Run(name, func(t *testing.T) {
			checkEncodeFilterResult(t, &Args{}, res)
		})
	}
	for name, names := range map[string][]string{
		"plain":   {"a", "b", "node-00001"},
		"escaped": {"a\"b", "é", "c/d", "\u2028"},
		"one":     {"n0"},
	} {
		t.Run("answer/"+name, func(t *testing.T) {
			checkAnswers(t, names, extenderv1.ExtenderFilterResult{FailedNodes: map[string]string{"x": "why"}})
		})
	}
}

// checkAnswers decodes a request for names (at least one) and encodes
// answers to it that keep every name (sent back as the request's text when
// plain), drop the first, and keep none.
func checkAnswers(t *testing.T, names []string, res extenderv1.ExtenderFilterResult) {
	t.Helper()
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: &corev1.Pod{}, NodeNames: &names})
	if err != nil {
		t.Fatal(err)
	}
	err = ReadArgs(body, func(args Args) error {
		for _, kept := range [][]string{*args.Names, (*args.Names)[1:], {}} {
			res.NodeNames = &kept
			checkEncodeFilterResult(t, &args, &res)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkEncodeFilterResult fails unless EncodeFilterResult's output decodes
// to what encoding/json's own output decodes to.
func checkEncodeFilterResult(t *testing.T, args *Args, res *extenderv1.ExtenderFilterResult) {
	t.Helper()
	var buf bytes.Buffer
	if err := args.EncodeFilterResult(&buf, res); err != nil {
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

// FuzzEncodeFilterResult holds the hand-written encoder to encoding/json,
// on names as given and as decoded from a request.
func FuzzEncodeFilterResult(f *testing.F) {
	f.Add("node-1", "why", "")
	f.Add("a\"b\\c", "\xff\x00<", "err\u2028")
	f.Fuzz(func(t *testing.T, name, reason, errText string) {
		failed := map[string]string{name + "x": reason}
		res := extenderv1.ExtenderFilterResult{FailedNodes: failed, FailedAndUnresolvableNodes: maps.Clone(failed), Error: errText}
		checkAnswers(t, []string{name, reason}, res)
		res.NodeNames = &[]string{name, reason}
		checkEncodeFilterResult(t, &Args{}, &res)
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

// seeds are valid ExtenderArgs of every shape the scheduler sends (an
// ordinary pod, an everynode daemon pod, a kube-proxy pod; node names or
// whole nodes) plus near misses.
func seeds(t testing.TB) [][]byte {
	ordinary := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
	}
	daemon := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "agent-x", Namespace: "ns", UID: "u2",
		Labels:          map[string]string{everynodev1alpha1.LabelDaemonPod: everynodev1alpha1.LabelDaemonPodValue, "controller-revision-hash": "v1"},
		Annotations:     map[string]string{everynodev1alpha1.AnnotationTargetNode: "n1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet", Name: "agent", UID: "s1", Controller: ptr.To(true)}},
	}}
	proxy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "kube-proxy-x", Namespace: "kube-system", UID: "u3",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", UID: "s2", Controller: ptr.To(true)}},
	}}
	var out [][]byte
	for _, pod := range []*corev1.Pod{ordinary, daemon, proxy} {
		for _, args := range []extenderv1.ExtenderArgs{
			{Pod: pod, NodeNames: &[]string{"n0", "n1", "n2", "n9"}},
			{Pod: pod, Nodes: &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}}},
		} {
			b, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	for _, junk := range []string{``, `{}`, `null`, `[]`, `{"Pod":null}`, `{"Pod":{},"NodeNames":null}`,
		`{"Pod":{"metadata":{"labels":{"everynode.io/daemon-pod":"true"}}},"NodeNames":["n1","n1"]}`,
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"cpu":"1x"}}}]}}}`, "{\"Pod\":{},\"NodeNames\":[\"\xff\"]}"} {
		out = append(out, []byte(junk))
	}
	return out
}
