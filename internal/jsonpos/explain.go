package jsonpos

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/rightsize/rightsize/internal/suggest"
)

// A ValueError is a problem with one value of a JSON text, in the words
// of the person who wrote it: `"command" must be a string, not a number`,
// `unknown key "comand" (did you mean "command"?)`.
type ValueError struct {
	// Path leads to the value at fault, as a Span's does: object keys,
	// and list indexes in decimal.
	Path []string
	Msg  string
}

func (e *ValueError) Error() string { return e.Msg }

// Explain turns err, an error of Decode(data, v), into a *ValueError
// rather than encoding/json's "cannot unmarshal number into Go struct
// field jsonRule.command of type string": a value of the wrong type, or
// an unknown key with the nearest known one. data may be the value at
// path prefix within a larger text: the error's Path and the names in its
// message are then from the top of that text. what names the whole value
// ("a rule") for an error about it. Other errors (of syntax) are returned
// as they are.
func Explain(err error, data []byte, v any, prefix []string, what string) error {
	spans, serr := Spans(data)
	if serr != nil {
		return err
	}
	full := func(path []string) []string { return append(prefix[:len(prefix):len(prefix)], path...) }
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		off, _ := Offset(err)
		var at Span
		for _, s := range spans {
			// The innermost value holding the offset: spans are in the
			// order they start, so the last that holds it.
			if s.Start <= off && off < s.End {
				at = s
			}
		}
		if field := strings.Split(typ.Field, "."); typ.Field != "" && !fieldOf(at.Path, field) {
			// The offset is within a value that a type's own
			// UnmarshalJSON decoded: the field's path says where.
			for _, s := range spans {
				if fieldOf(s.Path, field) {
					at = s
					break
				}
			}
		}
		return &ValueError{Path: full(at.Path), Msg: fmt.Sprintf("%s must be %s, not %s",
			cmp.Or(PathName(full(at.Path)), what), typeWords(typ.Type), valueWords(typ.Value))}
	}
	key, ok := unknownKey(err)
	if !ok {
		return err
	}
	for _, s := range spans {
		if s.Key < 0 || s.Path[len(s.Path)-1] != key {
			continue
		}
		parent := s.Path[:len(s.Path)-1]
		known, isStruct := knownKeys(reflect.TypeOf(v), parent)
		if !isStruct || slices.Contains(known, key) {
			continue // a key of this name where it is allowed
		}
		msg := fmt.Sprintf("unknown key %q", key)
		if near := suggest.Nearest(key, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		} else if len(known) > 0 {
			quoted := make([]string, len(known))
			for i, k := range known {
				quoted[i] = strconv.Quote(k)
			}
			msg += " (known: " + strings.Join(quoted, ", ") + ")"
		}
		if p := full(parent); len(p) > 0 {
			msg = PathName(p) + ": " + msg
		}
		return &ValueError{Path: full(s.Path), Msg: msg}
	}
	return err
}

// fieldOf reports whether a value at path is, or is within, the struct
// field that field (an UnmarshalTypeError's Field, split at its dots)
// names: its names are among path's keys, in order (path also holds list
// indexes and map keys).
func fieldOf(path, field []string) bool {
	i := 0
	for _, k := range path {
		if i < len(field) && k == field[i] {
			i++
		}
	}
	return i == len(field)
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

// PathName writes a path as a user reads it, quoted: "command",
// "resources.cores", "outputs[2]"; "" for the empty path.
func PathName(path []string) string {
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

// ValueWords says what the JSON value encoding/json calls kind is, in
// words: "number", "number 1.5", "string", "bool", "array", "object".
func ValueWords(kind string) string { return valueWords(kind) }

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

// knownKeys returns the keys of the object that path leads to
// within a value of the Go type t, and whether it is a struct's (a map
// takes any key).
func knownKeys(t reflect.Type, path []string) ([]string, bool) {
	deref := func(t reflect.Type) reflect.Type {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t
	}
	t = deref(t)
	for _, k := range path {
		switch t.Kind() {
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByJSONName(t, k)
			if !ok {
				return nil, false
			}
			t = f.Type
		default:
			return nil, false
		}
		t = deref(t)
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	var keys []string
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys, true
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// jsonName is the key of a struct field in JSON; "" for none.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}
