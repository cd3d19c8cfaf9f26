package makeflow

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/rightsize/rightsize/internal/jsonpos"
	"github.com/rightsize/rightsize/jx"
)

// The errors of a workflow's JSON form (and of a JX workflow evaluated to
// it) say, in a user's words, which value is wrong and why, at the place
// it is written: `rule 3: "command" must be a string, not a number` at the
// value's file:line:column, rather than encoding/json's "cannot unmarshal
// number into Go struct field jsonRule.command of type string" at the
// rule.

// A jsonText is one decoded JSON value of a workflow, a rule or the whole
// workflow, with what it takes to place its errors.
type jsonText struct {
	raw json.RawMessage
	pos Pos // where the value starts
	// find returns where the value that path (object keys, list indexes
	// in decimal) leads to within raw is written: its key, for a member
	// of an object. ok is false where path leads nowhere.
	find func(path []string) (pos Pos, ok bool)
}

// at returns where the value at path is written, or the whole value's
// position.
func (t jsonText) at(path []string) Pos {
	if t.find != nil {
		if p, ok := t.find(path); ok {
			return p
		}
	}
	return t.pos
}

// jsonFileText is a value that is a slice of a JSON file's text src,
// starting at offset base.
func jsonFileText(name string, src []byte, base int64, raw json.RawMessage) jsonText {
	var spans []jsonpos.Span
	find := func(path []string) (Pos, bool) {
		if spans == nil {
			spans, _ = jsonpos.Spans(raw)
		}
		for _, s := range spans {
			if slices.Equal(s.Path, path) {
				off := s.Start
				if s.Key >= 0 {
					off = s.Key
				}
				return offsetPos(name, src, base+off), true
			}
		}
		return Pos{}, false
	}
	return jsonText{raw: raw, pos: offsetPos(name, src, base), find: find}
}

// jxText is a value of a JX workflow, v, marshalled to raw; its paths are
// found in v, at the keys' positions (a JX string or number has none of
// its own).
func jxText(v jx.Value, raw json.RawMessage, pos Pos) jsonText {
	find := func(path []string) (Pos, bool) {
		at, found := pos, false
		for _, k := range path {
			switch x := v.(type) {
			case *jx.Object:
				i := slices.IndexFunc(x.Pairs, func(p jx.Pair) bool { return p.Key == k })
				if i < 0 {
					return at, found
				}
				at, found, v = jxPos(x.Pairs[i].Pos), true, x.Pairs[i].Value
			case *jx.List:
				n, err := strconv.Atoi(k)
				if err != nil || n < 0 || n >= len(x.Items) {
					return at, found
				}
				v = x.Items[n]
				if l, ok := v.(*jx.List); ok && l.Pos.IsValid() {
					at, found = jxPos(l.Pos), true
				} else if o, ok := v.(*jx.Object); ok && o.Pos.IsValid() {
					at, found = jxPos(o.Pos), true
				}
			default:
				return at, found
			}
		}
		return at, found
	}
	return jsonText{raw: raw, pos: pos, find: find}
}

// A valueError is a problem with the value at path (within a rule, or the
// workflow): its message names the value itself.
type valueError struct {
	path []string
	msg  string
}

func (e *valueError) Error() string { return e.msg }

// valueErrorf returns a *valueError at path.
func valueErrorf(path []string, format string, args ...any) error {
	return &valueError{path: path, msg: fmt.Sprintf(format, args...)}
}

// decode decodes raw, the value at path prefix within t, into v as
// jsonpos.Decode does, and turns its error into a *valueError in a
// user's words, its path within t. what names the whole value ("a rule")
// where the error is about it.
func (t jsonText) decode(raw json.RawMessage, prefix []string, v any, what string) error {
	err := jsonpos.Decode(raw, v)
	if err == nil {
		return nil
	}
	spans, serr := jsonpos.Spans(raw)
	if serr != nil {
		return err
	}
	full := func(path []string) []string { return append(prefix[:len(prefix):len(prefix)], path...) }
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		off, _ := jsonpos.Offset(err)
		var at jsonpos.Span
		for _, s := range spans {
			// The innermost value holding the offset: spans are in the
			// order they start, so the last that holds it.
			if s.Start <= off && off < s.End {
				at = s
			}
		}
		return &valueError{path: full(at.Path), msg: fmt.Sprintf("%s must be %s, not %s",
			cmp.Or(pathName(full(at.Path)), what), typeWords(typ.Type), valueWords(typ.Value))}
	}
	if key, ok := unknownKey(err); ok {
		for _, s := range spans {
			if s.Key >= 0 && s.Path[len(s.Path)-1] == key {
				msg := fmt.Sprintf("unknown key %q", key)
				if known := knownKeys(reflect.TypeOf(v), s.Path[:len(s.Path)-1]); len(known) > 0 {
					if near := nearest(key, known); near != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", near)
					} else {
						msg += " (known: " + strings.Join(known, ", ") + ")"
					}
				}
				if p := full(s.Path[:len(s.Path)-1]); len(p) > 0 {
					msg = pathName(p) + ": " + msg
				}
				return &valueError{path: full(s.Path), msg: msg}
			}
		}
	}
	return err
}

// unknownKey returns the key of an error of a decoder that disallows
// unknown fields: encoding/json has no type for it, only the words.
func unknownKey(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	key, err := strconv.Unquote(rest)
	return key, err == nil
}

// pathName writes a path as a user reads it: "command",
// "resources.cores", "outputs[2]"; "" for the empty path.
func pathName(path []string) string {
	if len(path) == 0 {
		return ""
	}
	var b strings.Builder
	for i, k := range path {
		if _, err := strconv.Atoi(k); err == nil && i > 0 {
			b.WriteString("[" + k + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return strconv.Quote(b.String())
}

// typeWords says what a value of the Go type t is in JSON.
func typeWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return typeWords(t.Elem())
	}
	return "an object"
}

// valueWords says what the JSON value encoding/json calls kind is:
// "number", "number 1.5", "string", "bool", "array", "object".
func valueWords(kind string) string {
	switch kind {
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	if n, ok := strings.CutPrefix(kind, "number "); ok {
		return n
	}
	return kind
}

// knownKeys returns the keys of the object that path leads to within a
// value of the Go type t: its struct's JSON names; none for a map.
func knownKeys(t reflect.Type, path []string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, k := range path {
		switch t.Kind() {
		case reflect.Map, reflect.Slice:
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByJSONName(t, k)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			keys = append(keys, strconv.Quote(name))
		}
	}
	return keys
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// nearest returns the one of the quoted keys known that key is a typo of
// (at most two edits away), or "".
func nearest(key string, known []string) string {
	best, bestD := "", 3
	for _, q := range known {
		k, _ := strconv.Unquote(q)
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
