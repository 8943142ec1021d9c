package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Args is ExtenderArgs as the extender's verbs read it.
type Args struct {
	// HasPod is false when the request has no pod (a 400).
	HasPod bool
	// Pod is the pod's metadata (labels, annotations, owner references,
	// name, UID), all any verb reads of it, and only when the pod may be a
	// daemon pod of either kind: it carries the everynode daemon-pod label
	// key or an owner of kind DaemonSet. ReadArgs leaves it nil for any
	// other pod, whose fields are checked for syntax only.
	Pod *corev1.Pod
	// Names is NodeNames as sent: nil when absent or null.
	Names *[]string
	// Nodes is Nodes as sent, for a scheduler without nodeCacheCapable.
	Nodes *corev1.NodeList

	// namesRaw is the JSON text of NodeNames when every name in it is a
	// plain string, so an answer that keeps every node can send it back as
	// it came instead of encoding 5,000 names again; "" otherwise.
	namesRaw string
}

// FromArgs turns ExtenderArgs decoded by encoding/json into Args; Pod is
// the whole pod.
func FromArgs(args *extenderv1.ExtenderArgs) Args {
	return Args{HasPod: args.Pod != nil, Pod: args.Pod, Names: args.NodeNames, Nodes: args.Nodes}
}

// ReadArgs decodes an ExtenderArgs body as encoding/json would, reading
// only what Args holds, and calls use with it. It returns the decoding
// error, without calling use, or else use's error. The Args, and the
// slice behind its Names, are valid only until use returns: the slice
// then goes back to a pool.
func ReadArgs(body []byte, use func(Args) error) error {
	args, err := decodeArgs(body)
	if err != nil {
		return err
	}
	defer args.release()
	return use(args)
}

// decodeArgsSlow decodes with encoding/json, for the rare input the fast
// path hands over.
func decodeArgsSlow(body []byte) (Args, error) {
	var args extenderv1.ExtenderArgs
	if err := json.Unmarshal(body, &args); err != nil {
		return Args{}, err
	}
	return FromArgs(&args), nil
}

// decodeArgs decodes an ExtenderArgs body as encoding/json would, reading
// only what Args holds. Call release on the result once done with Names.
func decodeArgs(body []byte) (Args, error) {
	sc := scanner{s: string(body)}
	sc.ws()
	if sc.i == len(sc.s) {
		return Args{}, errEOF
	}
	switch sc.s[sc.i] {
	case '{':
	case 'n': // null leaves ExtenderArgs empty, as encoding/json does
		if err := sc.literal("null"); err != nil {
			return Args{}, err
		}
		return Args{}, sc.end()
	default:
		if err := sc.value(); err != nil {
			return Args{}, err
		}
		if err := sc.end(); err != nil {
			return Args{}, err
		}
		return Args{}, errors.New("ExtenderArgs must be a JSON object")
	}

	var (
		req                     Args
		podRaw, nodesRaw        string
		seenPod, seenNames, dup bool
		seenNodes               bool
	)
	err := sc.object(func(key string) error {
		switch {
		case strings.EqualFold(key, "Pod"):
			dup, seenPod = dup || seenPod, true
			raw, err := sc.span()
			podRaw = raw
			return err
		case strings.EqualFold(key, "NodeNames"):
			dup, seenNames = dup || seenNames, true
			req.release() // a repeated key: keep the pool whole
			sc.ws()
			start := sc.i
			names, plainNames, err := sc.stringArray()
			req.Names = names
			if err == nil && names != nil && plainNames {
				req.namesRaw = sc.s[start:sc.i]
			}
			return err
		case strings.EqualFold(key, "Nodes"):
			dup, seenNodes = dup || seenNodes, true
			raw, err := sc.span()
			nodesRaw = raw
			return err
		default:
			return sc.value()
		}
	})
	if err == nil {
		err = sc.end()
	}
	if err != nil {
		req.release()
		return Args{}, err
	}
	if dup {
		// encoding/json merges a repeated object into the first: let it.
		req.release()
		return decodeArgsSlow(body)
	}
	if nodesRaw != "" && nodesRaw != "null" {
		req.Nodes = new(corev1.NodeList)
		if err := json.Unmarshal([]byte(nodesRaw), req.Nodes); err != nil {
			req.release()
			return Args{}, fmt.Errorf("decode Nodes: %w", err)
		}
	}
	switch {
	case podRaw == "" || podRaw == "null":
	case podRaw[0] != '{':
		req.release()
		return Args{}, errors.New("decode Pod: not a JSON object")
	default:
		req.HasPod = true
		if label, owner := podMarks(podRaw); label || owner {
			// Every verb reads only a daemon pod's metadata (labels,
			// annotations, owner references, name, UID): its spec and
			// status, most of the bytes, are checked for syntax only.
			var meta struct {
				ObjectMeta metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(podRaw), &meta); err != nil {
				req.release()
				return Args{}, fmt.Errorf("decode Pod: %w", err)
			}
			req.Pod = &corev1.Pod{ObjectMeta: meta.ObjectMeta}
		}
	}
	return req, nil
}

// podMarks tells, from a pod object already checked for syntax, whether
// it may be one of the two kinds of pod the extender must read: whether
// some metadata.labels key (matched as encoding/json matches field names)
// is the daemon label, or some metadata.ownerReferences entry has kind
// DaemonSet. If neither, no decoding can make it either kind; if one is,
// the caller decodes the pod for real. On doubt (an escaped string, a
// syntax the scan does not follow), it says yes.
func podMarks(raw string) (daemonLabel, daemonSetOwner bool) {
	sc := scanner{s: raw}
	err := sc.object(func(key string) error {
		if !strings.EqualFold(key, "metadata") || sc.peek() != '{' {
			return sc.value()
		}
		return sc.object(func(key string) error {
			switch {
			case strings.EqualFold(key, "labels") && sc.peek() == '{':
				return sc.object(func(key string) error {
					if key == everynodev1alpha1.LabelDaemonPod {
						daemonLabel = true
					}
					return sc.value()
				})
			case strings.EqualFold(key, "ownerReferences") && sc.peek() == '[':
				return sc.array(func() error {
					if sc.peek() != '{' {
						return sc.value()
					}
					return sc.object(func(key string) error {
						if !strings.EqualFold(key, "kind") {
							return sc.value()
						}
						v, err := sc.span()
						if v == `"DaemonSet"` || strings.Contains(v, `\`) {
							daemonSetOwner = true
						}
						return err
					})
				})
			default:
				return sc.value()
			}
		})
	})
	if err != nil {
		return true, true
	}
	return daemonLabel, daemonSetOwner
}

// namesPool recycles NodeNames slices: at 5,000 names, growing a fresh
// slice for each call made most of the garbage left after decoding.
var namesPool = sync.Pool{New: func() any {
	names := make([]string, 0, 256)
	return &names
}}

// maxPooledNames bounds the slices kept in namesPool.
const maxPooledNames = 1 << 15

// release returns the Names slice to the pool. Call it once nothing
// refers to the names any more, that is after the answer is written; the
// Args must not be used after.
func (args *Args) release() {
	p := args.Names
	args.Names, args.namesRaw = nil, ""
	if p == nil || cap(*p) > maxPooledNames {
		return
	}
	clear(*p) // let the body they point into be collected
	*p = (*p)[:0]
	namesPool.Put(p)
}

// stringArray reads null or an array of strings (a null element is "", as
// encoding/json leaves it). plainNames is true when every element was a
// plain string, without escapes or nulls.
func (sc *scanner) stringArray() (_ *[]string, plainNames bool, _ error) {
	switch sc.peek() {
	case 'n':
		return nil, false, sc.literal("null")
	case '[':
	default:
		if err := sc.value(); err != nil {
			return nil, false, err
		}
		return nil, false, errors.New("NodeNames must be an array of strings")
	}
	p := namesPool.Get().(*[]string)
	names := (*p)[:0]
	plainNames = true
	err := sc.nameElements(&names, &plainNames)
	*p = names
	if err != nil {
		return p, false, err // the caller releases it with the request
	}
	return p, plainNames, nil
}

// nameElements reads the elements of a string array after its '[', up to
// and including the ']'. It is sc.array specialised for the one array
// that is long: no callback per element, and no whitespace skipping where
// a compact encoder puts none.
func (sc *scanner) nameElements(names *[]string, plainNames *bool) error {
	if sc.depth++; sc.depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	sc.i++ // the '['
	if sc.peek() == ']' {
		sc.i++
		sc.depth--
		return nil
	}
	for {
		if sc.i == len(sc.s) || sc.s[sc.i] != '"' {
			sc.ws()
		}
		switch {
		case sc.i == len(sc.s):
			return errEOF
		case sc.s[sc.i] == '"':
			tok, simple, err := sc.str()
			if err != nil {
				return err
			}
			name := tok[1 : len(tok)-1]
			if !simple {
				*plainNames = false
				if name, err = unquote(tok); err != nil {
					return err
				}
			}
			*names = append(*names, name)
		case sc.s[sc.i] == 'n':
			*plainNames = false
			*names = append(*names, "")
			if err := sc.literal("null"); err != nil {
				return err
			}
		default:
			if err := sc.value(); err != nil {
				return err
			}
			return errors.New("NodeNames must be an array of strings")
		}
		if sc.i == len(sc.s) || (sc.s[sc.i] != ',' && sc.s[sc.i] != ']') {
			sc.ws()
		}
		switch {
		case sc.i == len(sc.s):
			return errEOF
		case sc.s[sc.i] == ',':
			sc.i++
		case sc.s[sc.i] == ']':
			sc.i++
			sc.depth--
			return nil
		default:
			return sc.syntaxError("after array element")
		}
	}
}
