package jx

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Value is the result of an evaluation: nil (null), bool, int64,
// float64, string, *List or *Object.
type Value any

// A List is a JX list (JSON array).
type List struct {
	Items []Value
	// Pos is where the list's constructor was written; zero for a list
	// a function made.
	Pos Pos
}

// An Object is a JX object. Its pairs keep the order they were written
// in, and a key may appear twice (CCTools keeps both; Lookup finds the
// first).
type Object struct {
	Pairs []Pair
	// Pos is where the object's constructor was written; zero for an
	// object a function made.
	Pos Pos
}

// A Pair is a key and its value in an Object.
type Pair struct {
	Key   string
	Value Value
	Pos   Pos // where the key was written
}

// Lookup returns the value of the first pair with the key.
func (o *Object) Lookup(key string) (Value, bool) {
	for _, p := range o.Pairs {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

// Pair returns the first pair with the key.
func (o *Object) Pair(key string) (Pair, bool) {
	for _, p := range o.Pairs {
		if p.Key == key {
			return p, true
		}
	}
	return Pair{}, false
}

// TypeName names the type of v as CCTools does: null, boolean, integer,
// float, string, array or object.
func TypeName(v Value) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "float"
	case string:
		return "string"
	case *List:
		return "array"
	case *Object:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// Format writes v compactly in JSON, as CCTools' jx2json prints it:
// floats with 16 significant digits (so 2.0 is written 2), no spaces;
// unlike jx2json it leaves ' unescaped and non-ASCII text in UTF-8, as
// JSON has them.
// Infinite and NaN floats are written inf, -inf and nan, which JSON
// lacks; MarshalJSON refuses them.
func Format(v Value) string {
	var b strings.Builder
	appendValue(&b, v)
	return b.String()
}

// MarshalJSON returns v as JSON text, written as Format writes it; it
// fails on infinite or NaN floats.
func MarshalJSON(v Value) ([]byte, error) {
	var bad error
	var check func(v Value)
	check = func(v Value) {
		switch v := v.(type) {
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				bad = fmt.Errorf("%s cannot be written in JSON", formatFloat(v))
			}
		case *List:
			for _, x := range v.Items {
				check(x)
			}
		case *Object:
			for _, p := range v.Pairs {
				check(p.Value)
			}
		}
	}
	if check(v); bad != nil {
		return nil, bad
	}
	return []byte(Format(v)), nil
}

func appendValue(b *strings.Builder, v Value) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(formatFloat(v))
	case string:
		appendString(b, v)
	case *List:
		b.WriteByte('[')
		for i, x := range v.Items {
			if i > 0 {
				b.WriteByte(',')
			}
			appendValue(b, x)
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		for i, p := range v.Pairs {
			if i > 0 {
				b.WriteByte(',')
			}
			appendString(b, p.Key)
			b.WriteByte(':')
			appendValue(b, p.Value)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("jx: not a value: %T", v))
	}
}

func appendString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError && size == 1:
			fmt.Fprintf(b, `\u%04x`, s[i])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// formatFloat writes f as C's printf("%.16g") does, which is how CCTools
// prints floats, also where a float joins a string ("a" + 2.5).
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', 16, 64)
}

// atomString is the text an atomic value adds to a string it is added to.
func atomString(v Value) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool, int64, float64:
		return Format(v), true
	}
	return "", false
}

// equal reports whether a and b are the same value; inside lists and
// objects an integer never equals a float, as in CCTools.
func equal(a, b Value) bool {
	switch a := a.(type) {
	case *List:
		b, ok := b.(*List)
		if !ok || len(a.Items) != len(b.Items) {
			return false
		}
		for i := range a.Items {
			if !equal(a.Items[i], b.Items[i]) {
				return false
			}
		}
		return true
	case *Object:
		// The same keys with equal values, in any order.
		b, ok := b.(*Object)
		if !ok || len(a.Pairs) != len(b.Pairs) {
			return false
		}
		for _, p := range a.Pairs {
			if v, ok := b.Lookup(p.Key); !ok || !equal(p.Value, v) {
				return false
			}
		}
		return true
	}
	return a == b
}
