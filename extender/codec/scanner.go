package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, kept so both reject alike.
const maxDepth = 10000

var errEOF = errors.New("unexpected end of JSON input")

// scanner reads JSON from s, checking syntax as encoding/json does.
type scanner struct {
	s     string
	i     int
	depth int
}

// ws skips JSON whitespace.
func (sc *scanner) ws() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (sc *scanner) peek() byte {
	sc.ws()
	if sc.i == len(sc.s) {
		return 0
	}
	return sc.s[sc.i]
}

// end checks that only whitespace is left.
func (sc *scanner) end() error {
	sc.ws()
	if sc.i != len(sc.s) {
		return fmt.Errorf("invalid character %q after top-level value", sc.s[sc.i])
	}
	return nil
}

func (sc *scanner) syntaxError(what string) error {
	if sc.i >= len(sc.s) {
		return errEOF
	}
	return fmt.Errorf("invalid character %q %s at offset %d", sc.s[sc.i], what, sc.i)
}

// value skips one value of any kind.
func (sc *scanner) value() error {
	switch c := sc.peek(); {
	case c == '{':
		return sc.object(func(string) error { return sc.value() })
	case c == '[':
		return sc.array(sc.value)
	case c == '"':
		_, _, err := sc.str()
		return err
	case c == 't':
		return sc.literal("true")
	case c == 'f':
		return sc.literal("false")
	case c == 'n':
		return sc.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return sc.number()
	default:
		return sc.syntaxError("looking for beginning of value")
	}
}

// span skips one value and returns its text.
func (sc *scanner) span() (string, error) {
	sc.ws()
	start := sc.i
	if err := sc.value(); err != nil {
		return "", err
	}
	return sc.s[start:sc.i], nil
}

// object reads an object, calling member with each decoded key; member
// must consume the value.
func (sc *scanner) object(member func(key string) error) error {
	if sc.peek() != '{' {
		return sc.syntaxError("looking for beginning of object")
	}
	if sc.depth++; sc.depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	sc.i++
	if sc.peek() == '}' {
		sc.i++
		sc.depth--
		return nil
	}
	for {
		if sc.peek() != '"' {
			return sc.syntaxError("looking for beginning of object key string")
		}
		tok, simple, err := sc.str()
		if err != nil {
			return err
		}
		key := tok[1 : len(tok)-1]
		if !simple {
			if key, err = unquote(tok); err != nil {
				return err
			}
		}
		if sc.peek() != ':' {
			return sc.syntaxError("after object key")
		}
		sc.i++
		if err := member(key); err != nil {
			return err
		}
		switch sc.peek() {
		case ',':
			sc.i++
		case '}':
			sc.i++
			sc.depth--
			return nil
		default:
			return sc.syntaxError("after object key:value pair")
		}
	}
}

// array reads an array, calling elem for each element; elem must consume it.
func (sc *scanner) array(elem func() error) error {
	if sc.peek() != '[' {
		return sc.syntaxError("looking for beginning of array")
	}
	if sc.depth++; sc.depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	sc.i++
	if sc.peek() == ']' {
		sc.i++
		sc.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch sc.peek() {
		case ',':
			sc.i++
		case ']':
			sc.i++
			sc.depth--
			return nil
		default:
			return sc.syntaxError("after array element")
		}
	}
}

// plain marks the bytes a string may hold as they are: printable ASCII
// other than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string token and returns it with its quotes; simple is true
// when it holds only plain bytes, so that its content is the token's
// inside as it stands.
func (sc *scanner) str() (tok string, simple bool, err error) {
	start := sc.i
	i := sc.i + 1
	simple = true
	for {
		// Eight bytes at a time while none of them is special, then byte
		// by byte up to the special one.
		for i+8 <= len(sc.s) && !hasSpecial(load64(sc.s, i)) {
			i += 8
		}
		for i < len(sc.s) && plain[sc.s[i]] {
			i++
		}
		if i == len(sc.s) {
			sc.i = i
			return "", false, errEOF
		}
		switch c := sc.s[i]; {
		case c == '"':
			sc.i = i + 1
			return sc.s[start:sc.i], simple, nil
		case c == '\\':
			simple = false
			if i+1 == len(sc.s) {
				sc.i = i + 1
				return "", false, errEOF
			}
			switch sc.s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k == len(sc.s) {
						sc.i = k
						return "", false, errEOF
					}
					if !isHex(sc.s[k]) {
						sc.i = k
						return "", false, sc.syntaxError("in \\u hexadecimal character escape")
					}
				}
				i += 6
			default:
				sc.i = i + 1
				return "", false, sc.syntaxError("in string escape code")
			}
		case c < 0x20:
			sc.i = i
			return "", false, sc.syntaxError("in string literal")
		default: // non-ASCII: encoding/json repairs invalid UTF-8, let it
			simple = false
			i++
		}
	}
}

// load64 reads eight bytes of s at i, little-endian; the compiler turns
// it into one load.
func load64(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// hasSpecial reports whether any of the eight bytes in x is not plain: a
// quote, a backslash, a control byte (< 0x20) or a non-ASCII byte. It uses
// the classic "has zero byte" test, (v - 0x01..) &^ v & 0x80..: exact as
// to whether some byte matches, which is all the loop needs.
func hasSpecial(x uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (lsb * '"')
	backslash := x ^ (lsb * '\\')
	return ((quote-lsb)&^quote|(backslash-lsb)&^backslash|(x-lsb*0x20)|x)&msb != 0
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// unquote decodes a string token that is not simple, as encoding/json does
// (escapes, surrogate pairs, invalid UTF-8 replaced).
func unquote(tok string) (string, error) {
	var s string
	if err := json.Unmarshal([]byte(tok), &s); err != nil {
		return "", err
	}
	return s, nil
}

// literal reads true, false or null.
func (sc *scanner) literal(word string) error {
	sc.ws()
	if !strings.HasPrefix(sc.s[sc.i:], word) {
		for k := 0; k < len(word); k++ {
			if sc.i+k == len(sc.s) {
				sc.i += k
				return errEOF
			}
			if sc.s[sc.i+k] != word[k] {
				sc.i += k
				return sc.syntaxError("in literal " + word)
			}
		}
	}
	sc.i += len(word)
	return nil
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *scanner) number() error {
	i, s := sc.i, sc.s
	digits := func() bool {
		start := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > start
	}
	fail := func(what string) error {
		sc.i = i
		return sc.syntaxError(what)
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return fail("in numeric literal")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return fail("after decimal point in numeric literal")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return fail("in exponent of numeric literal")
		}
	}
	sc.i = i
	return nil
}
