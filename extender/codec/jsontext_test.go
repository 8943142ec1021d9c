//go:build goexperiment.jsonv2

// The codec against a decoder on encoding/json/jsontext, the token reader
// of encoding/json/v2, which Go ships only under GOEXPERIMENT=jsonv2 so
// far. Issue 52 asked for the codec to go if such a decoder came within
// 1.5x of it at 5,000 names; it did not (bench/RESULTS.md). This file
// keeps the comparison for when jsontext leaves the experiment, in
// BenchmarkDecodeArgs and in the differential tests:
//
//	GOEXPERIMENT=jsonv2 go test -run='^$' -bench=BenchmarkDecodeArgs -count=10 ./extender/codec
//
// Under the experiment encoding/json itself runs on v2, so its figures
// there are not the product's.

package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// jtOptions make jsontext as lenient as encoding/json: repeated names and
// invalid UTF-8 (replaced) are accepted.
var jtOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// jtState is a decoder and the buffer it reads from, pooled together:
// jsontext reads a *bytes.Buffer in place, without copying it.
type jtState struct {
	dec jsontext.Decoder
	buf bytes.Buffer
}

var jtPool = sync.Pool{New: func() any { return new(jtState) }}

func init() { decoders["jsontext"] = decodeArgsJSONText }

// decodeArgsJSONText is decodeArgs on jsontext's token reader, with the
// same outputs: pooled Names as substrings of one copy of the body, the
// names' text when all are plain, the pod walked for its daemon marks
// with its spec skipped, and encoding/json for a daemon pod's metadata,
// Nodes and duplicate keys.
func decodeArgsJSONText(body []byte) (Args, error) {
	st := jtPool.Get().(*jtState)
	st.buf = *bytes.NewBuffer(body)
	st.dec.Reset(&st.buf, jtOptions...)
	defer func() {
		st.buf = bytes.Buffer{}
		st.dec.Reset(&st.buf)
		jtPool.Put(st)
	}()
	jt := jtDecoder{d: &st.dec, s: string(body)}
	return jt.args(body)
}

// jtDecoder walks ExtenderArgs with a jsontext decoder over s.
type jtDecoder struct {
	d *jsontext.Decoder
	s string // the body, for names as substrings
}

func jtErr(err error) error {
	if err == io.EOF {
		return errEOF
	}
	return err
}

// end checks that nothing follows the top-level value.
func (jt *jtDecoder) end() error {
	_, err := jt.d.ReadToken()
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return errors.New("invalid data after top-level value")
	}
	return err
}

// name reads an object name; the bytes are valid until the next read.
func (jt *jtDecoder) name() ([]byte, error) {
	v, err := jt.d.ReadValue()
	if err != nil {
		return nil, jtErr(err)
	}
	if isPlainBytes(v[1 : len(v)-1]) {
		return v[1 : len(v)-1], nil
	}
	s, err := unquote(string(v))
	return []byte(s), err
}

func isPlainBytes(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if hasSpecial(binary.LittleEndian.Uint64(b[i:])) {
			return false
		}
	}
	for ; i < len(b); i++ {
		if needsEscape[b[i]] {
			return false
		}
	}
	return true
}

func (jt *jtDecoder) args(body []byte) (Args, error) {
	d := jt.d
	switch d.PeekKind() {
	case '{':
	case 'n':
		if _, err := d.ReadToken(); err != nil {
			return Args{}, err
		}
		return Args{}, jt.end()
	default:
		if _, err := d.ReadValue(); err != nil {
			return Args{}, jtErr(err)
		}
		if err := jt.end(); err != nil {
			return Args{}, err
		}
		return Args{}, errors.New("ExtenderArgs must be a JSON object")
	}
	if _, err := d.ReadToken(); err != nil {
		return Args{}, jtErr(err)
	}
	var (
		req                     Args
		nodesRaw                []byte
		podIsObject, podBad     bool
		daemonMarks             bool
		podStart, podEnd        int64
		seenPod, seenNames, dup bool
		seenNodes               bool
	)
	fail := func(err error) (Args, error) {
		req.release()
		return Args{}, jtErr(err)
	}
	for d.PeekKind() != '}' {
		key, err := jt.name()
		if err != nil {
			return fail(err)
		}
		switch {
		case bytes.EqualFold(key, []byte("Pod")):
			dup, seenPod = dup || seenPod, true
			podIsObject, podBad, daemonMarks = false, false, false
			switch d.PeekKind() {
			case '{':
				podIsObject = true
				podStart = d.InputOffset()
				if daemonMarks, err = jt.podMarks(); err != nil {
					return fail(err)
				}
				podEnd = d.InputOffset()
			case 'n':
				_, err = d.ReadToken()
			default:
				podBad = true
				_, err = d.ReadValue()
			}
		case bytes.EqualFold(key, []byte("NodeNames")):
			dup, seenNames = dup || seenNames, true
			req.release() // a repeated key: keep the pool whole
			req.namesRaw = ""
			err = jt.names(&req)
		case bytes.EqualFold(key, []byte("Nodes")):
			dup, seenNodes = dup || seenNodes, true
			var v jsontext.Value
			v, err = d.ReadValue()
			nodesRaw = v.Clone()
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return fail(err)
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return fail(err)
	}
	if err := jt.end(); err != nil {
		return fail(err)
	}
	if dup {
		// encoding/json merges a repeated object into the first: let it.
		req.release()
		return decodeArgsSlow(body)
	}
	if nodesRaw != nil && string(nodesRaw) != "null" {
		req.Nodes = new(corev1.NodeList)
		if err := json.Unmarshal(nodesRaw, req.Nodes); err != nil {
			return fail(fmt.Errorf("decode Nodes: %w", err))
		}
	}
	switch {
	case podBad:
		return fail(errors.New("decode Pod: not a JSON object"))
	case podIsObject:
		req.HasPod = true
		if daemonMarks {
			// podStart is the offset after the key: the ':' and any space
			// come first.
			raw := bytes.TrimLeft(body[podStart:podEnd], " \t\r\n:")
			var meta struct {
				ObjectMeta metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				return fail(fmt.Errorf("decode Pod: %w", err))
			}
			req.Pod = &corev1.Pod{ObjectMeta: meta.ObjectMeta}
		}
	}
	return req, nil
}

// names reads NodeNames: null or an array of strings (a null element is
// "", as encoding/json leaves it).
func (jt *jtDecoder) names(req *Args) error {
	d := jt.d
	switch d.PeekKind() {
	case 'n':
		_, err := d.ReadToken()
		return err
	case '[':
	default:
		if _, err := d.ReadValue(); err != nil {
			return err
		}
		return errors.New("NodeNames must be an array of strings")
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	start := d.InputOffset() - 1
	p := namesPool.Get().(*[]string)
	names := (*p)[:0]
	defer func() { *p = names; req.Names = p }()
	plainNames := true
	for {
		// No PeekKind per element: at the ']' ReadValue fails and leaves
		// the decoder as it was.
		v, err := d.ReadValue()
		if err != nil {
			if d.PeekKind() != ']' {
				return err
			}
			if _, err := d.ReadToken(); err != nil {
				return err
			}
			if plainNames {
				req.namesRaw = jt.s[start:d.InputOffset()]
			}
			return nil
		}
		switch v[0] {
		case '"':
			end := int(d.InputOffset())
			if isPlainBytes(v[1 : len(v)-1]) {
				names = append(names, jt.s[end-len(v)+1:end-1])
				continue
			}
			plainNames = false
			name, err := unquote(string(v))
			if err != nil {
				return err
			}
			names = append(names, name)
		case 'n':
			plainNames = false
			names = append(names, "")
		default:
			return errors.New("NodeNames must be an array of strings")
		}
	}
}

// podMarks reads the pod object and tells whether it may be one of the two
// kinds of pod the extender must read (see podMarks in decode.go). On
// doubt (an escaped kind), it says yes.
func (jt *jtDecoder) podMarks() (bool, error) {
	marks := false
	err := jt.object(func(key []byte) error {
		if !bytes.EqualFold(key, []byte("metadata")) || jt.d.PeekKind() != '{' {
			return jt.d.SkipValue()
		}
		return jt.object(func(key []byte) error {
			switch {
			case bytes.EqualFold(key, []byte("labels")) && jt.d.PeekKind() == '{':
				return jt.object(func(key []byte) error {
					if string(key) == everynodev1alpha1.LabelDaemonPod {
						marks = true
					}
					return jt.d.SkipValue()
				})
			case bytes.EqualFold(key, []byte("ownerReferences")) && jt.d.PeekKind() == '[':
				if _, err := jt.d.ReadToken(); err != nil {
					return err
				}
				for jt.d.PeekKind() != ']' {
					if jt.d.PeekKind() != '{' {
						if err := jt.d.SkipValue(); err != nil {
							return err
						}
						continue
					}
					err := jt.object(func(key []byte) error {
						if !bytes.EqualFold(key, []byte("kind")) {
							return jt.d.SkipValue()
						}
						v, err := jt.d.ReadValue()
						if string(v) == `"DaemonSet"` || bytes.IndexByte(v, '\\') >= 0 {
							marks = true
						}
						return err
					})
					if err != nil {
						return err
					}
				}
				_, err := jt.d.ReadToken()
				return err
			default:
				return jt.d.SkipValue()
			}
		})
	})
	return marks, err
}

// object reads an object, calling member with each name; member must
// consume the value. On a syntax error PeekKind returns 0 and the next
// read reports it.
func (jt *jtDecoder) object(member func(key []byte) error) error {
	if _, err := jt.d.ReadToken(); err != nil {
		return err
	}
	for jt.d.PeekKind() != '}' {
		key, err := jt.name()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
	}
	_, err := jt.d.ReadToken()
	return err
}
