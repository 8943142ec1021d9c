package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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

// decodeArgsJSONText is DecodeArgs on jsontext's tokenizer: the same
// outputs (pooled Names as substrings of one copy of the body, NamesRaw,
// the pod's metadata only when it may be a daemon pod).
func decodeArgsJSONText(body []byte) (Args, error) { return decodeArgsJT(body, namesReadValue) }

// Variants of the names loop, for the benchmark.
const (
	namesReadValue = iota // ReadValue per element, the ']' seen by its error
	namesPeek             // PeekKind then ReadValue per element
	namesTokens           // ReadToken and Token.String per element
	namesSplit            // ReadValue of the whole array, split by hand
)

func decodeArgsJT(body []byte, mode int) (Args, error) {
	st := jtPool.Get().(*jtState)
	st.buf = *bytes.NewBuffer(body)
	st.dec.Reset(&st.buf, jtOptions...)
	defer func() {
		st.buf = bytes.Buffer{}
		st.dec.Reset(&st.buf)
		jtPool.Put(st)
	}()
	jt := jtDecoder{d: &st.dec, s: string(body), mode: mode}
	return jt.args(body)
}

// jtDecoder walks ExtenderArgs with a jsontext decoder over s.
type jtDecoder struct {
	d    *jsontext.Decoder
	s    string // the body, for names as substrings
	mode int
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
	if jt.mode == namesSplit {
		v, err := d.ReadValue()
		if err != nil {
			return err
		}
		end := int(d.InputOffset())
		p := namesPool.Get().(*[]string)
		names := (*p)[:0]
		defer func() { *p = names; req.Names = p }()
		return jt.namesSplit(req, jt.s[end-len(v):end], &names)
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	start := d.InputOffset() - 1
	p := namesPool.Get().(*[]string)
	names := (*p)[:0]
	defer func() { *p = names; req.Names = p }()
	switch jt.mode {
	case namesPeek:
		return jt.namesPeek(req, start, &names)
	case namesTokens:
		return jt.namesTokens(req, &names)
	}
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

func (jt *jtDecoder) namesPeek(req *Args, start int64, names *[]string) error {
	d := jt.d
	plainNames := true
	for {
		switch d.PeekKind() {
		case '"':
			v, err := d.ReadValue()
			if err != nil {
				return err
			}
			end := int(d.InputOffset())
			if isPlainBytes(v[1 : len(v)-1]) {
				*names = append(*names, jt.s[end-len(v)+1:end-1])
				continue
			}
			plainNames = false
			name, err := unquote(string(v))
			if err != nil {
				return err
			}
			*names = append(*names, name)
		case 'n':
			plainNames = false
			*names = append(*names, "")
			if _, err := d.ReadToken(); err != nil {
				return err
			}
		case ']':
			if _, err := d.ReadToken(); err != nil {
				return err
			}
			if plainNames {
				req.namesRaw = jt.s[start:d.InputOffset()]
			}
			return nil
		case 0:
			_, err := d.ReadToken() // the error PeekKind saw
			return err
		default:
			if _, err := d.ReadValue(); err != nil {
				return err
			}
			return errors.New("NodeNames must be an array of strings")
		}
	}
}

// namesTokens is jsontext used plainly: one string allocated per name.
func (jt *jtDecoder) namesTokens(req *Args, names *[]string) error {
	d := jt.d
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch tok.Kind() {
		case '"':
			*names = append(*names, tok.String())
		case 'n':
			*names = append(*names, "")
		case ']':
			return nil
		default:
			return errors.New("NodeNames must be an array of strings")
		}
	}
}

// namesSplit has jsontext check the whole array, then splits the checked
// text.
func (jt *jtDecoder) namesSplit(req *Args, s string, names *[]string) error {
	plainNames := true
	i := 1 // after '['
	for {
		for s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == ',' {
			i++
		}
		switch s[i] {
		case ']':
			if plainNames {
				req.namesRaw = s
			}
			return nil
		case '"':
			j := i + 1
			simple := true
			for s[j] != '"' {
				if s[j] == '\\' {
					simple = false
					j++
				} else if s[j] >= 0x80 {
					simple = false
				}
				j++
			}
			if simple {
				*names = append(*names, s[i+1:j])
			} else {
				plainNames = false
				name, err := unquote(s[i : j+1])
				if err != nil {
					return err
				}
				*names = append(*names, name)
			}
			i = j + 1
		case 'n':
			plainNames = false
			*names = append(*names, "")
			i += len("null")
		default:
			return errors.New("NodeNames must be an array of strings")
		}
	}
}
