package codec

import (
	"bytes"
	"encoding/json"
	"fmt"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// needsEscape marks the bytes a JSON string cannot hold as they are.
var needsEscape = func() (t [256]bool) {
	for c := range t {
		t[c] = !plain[c]
	}
	return t
}()

// appendString appends s as a JSON string. Node names are DNS names, so
// the loop almost always copies them as they are; anything else goes
// through encoding/json for its exact escaping.
func appendString(buf *bytes.Buffer, s string) {
	if !isPlain(s) {
		b, _ := json.Marshal(s) // a string always marshals
		buf.Write(b)
		return
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

// appendStringMap appends m as a JSON object, or null for a nil map.
func appendStringMap(buf *bytes.Buffer, m map[string]string) {
	if m == nil {
		buf.WriteString("null")
		return
	}
	buf.WriteByte('{')
	first := true
	for k, v := range m {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		appendString(buf, k)
		buf.WriteByte(':')
		appendString(buf, v)
	}
	buf.WriteByte('}')
}

// appendNames appends names as a JSON array, straight into the buffer's
// spare capacity; names that need escaping (none, if plain) go through
// appendString.
func appendNames(buf *bytes.Buffer, names []string, plain bool) {
	b := buf.AvailableBuffer()
	b = append(b, '[')
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		if !plain && !isPlain(name) {
			buf.Write(b)
			appendString(buf, name)
			b = buf.AvailableBuffer()
			continue
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"')
	}
	b = append(b, ']')
	buf.Write(b)
}

// isPlain reports whether s can be written between quotes as it is.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if needsEscape[s[i]] {
			return false
		}
	}
	return true
}

// EncodeFilterResult writes res, the answer to args, as encoding/json
// would (fields in order; map keys unordered, which JSON allows).
// res.NodeNames must be a subsequence of args.Names, as a filter's passed
// nodes are: then, when args' names were all plain, so are these, and when
// none was dropped they are args' names and go back as the text they came
// in.
func (args *Args) EncodeFilterResult(buf *bytes.Buffer, res *extenderv1.ExtenderFilterResult) error {
	buf.WriteString(`{"Nodes":`)
	if res.Nodes == nil {
		buf.WriteString("null")
	} else {
		b, err := json.Marshal(res.Nodes)
		if err != nil {
			return fmt.Errorf("encode Nodes: %w", err)
		}
		buf.Write(b)
	}
	buf.WriteString(`,"NodeNames":`)
	switch {
	case res.NodeNames == nil || *res.NodeNames == nil:
		buf.WriteString("null")
	case args.namesRaw != "" && len(*res.NodeNames) == len(*args.Names):
		buf.WriteString(args.namesRaw)
	default:
		appendNames(buf, *res.NodeNames, args.namesRaw != "")
	}
	buf.WriteString(`,"FailedNodes":`)
	appendStringMap(buf, res.FailedNodes)
	buf.WriteString(`,"FailedAndUnresolvableNodes":`)
	appendStringMap(buf, res.FailedAndUnresolvableNodes)
	buf.WriteString(`,"Error":`)
	appendString(buf, res.Error)
	buf.WriteString("}\n")
	return nil
}
