// Package jsonpos decodes the JSON files users write (workflows, scenarios)
// strictly — unknown keys and trailing data are errors, since a typo in a
// key would otherwise be ignored — and says where in the text a decoding
// error is, and where each value is written (Spans), so that an error
// can be shown at the value it concerns. Explain words a decoding error as
// its writer reads it (a ValueError: `"command" must be a string, not a
// number`, an unknown key with the nearest known one) at the path of the
// value at fault.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
)

// Decode decodes one JSON value from data into v, refusing unknown keys and
// anything after the value.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// Offset returns the byte offset in the decoded text of a syntax or type
// error from Decode, and false for other errors.
func Offset(err error) (int64, bool) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	// Both offsets count the bytes read, up to and including the bad one.
	switch {
	case errors.As(err, &syn):
		return max(syn.Offset-1, 0), true
	case errors.As(err, &typ):
		return max(typ.Offset-1, 0), true
	}
	return 0, false
}

// LineCol turns a byte offset in src into a line and column, from 1.
func LineCol(src []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(src)))
	before := src[:off]
	return 1 + bytes.Count(before, []byte("\n")), int(off) - bytes.LastIndexByte(before, '\n')
}

// A Span is where one value of a JSON text is written.
type Span struct {
	// Path leads from the text's top value to this one: object keys, and
	// list indexes in decimal. It is empty for the top value.
	Path []string
	// Key is the offset of the opening quote of the value's key, or -1
	// for a list item or the top value.
	Key int64
	// Start and End are the offsets of the value's first byte and of the
	// byte after its last.
	Start, End int64
}

// Spans returns where each value of the JSON text data is written, in the
// order they start: what a decoding error's offset or a key's name needs
// to be shown at its place in the text.
func Spans(data []byte) ([]Span, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var spans []Span
	var walk func(path []string, key int64) error
	walk = func(path []string, key int64) error {
		start := skipSeparators(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		i := len(spans)
		spans = append(spans, Span{Path: path, Key: key, Start: start})
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				kstart := skipSeparators(data, dec.InputOffset())
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name, _ := k.(string)
				if err := walk(append(path[:len(path):len(path)], name), kstart); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for n := 0; dec.More(); n++ {
				if err := walk(append(path[:len(path):len(path)], strconv.Itoa(n)), -1); err != nil {
					return err
				}
			}
		default:
			spans[i].End = dec.InputOffset()
			return nil
		}
		if _, err := dec.Token(); err != nil { // the closing '}' or ']'
			return err
		}
		spans[i].End = dec.InputOffset()
		return nil
	}
	if err := walk(nil, -1); err != nil {
		return nil, err
	}
	return spans, nil
}

// skipSeparators returns the offset of the first byte at or after off
// that is neither white space nor a ',' or ':' between values: where
// the next token starts.
func skipSeparators(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// Locate returns the offset in data of the value at path, a Span's: of
// its key, for a member of an object. ok is false if no value is there
// or data is not JSON.
func Locate(data []byte, path []string) (off int64, ok bool) {
	spans, err := Spans(data)
	if err != nil {
		return 0, false
	}
	for _, s := range spans {
		if slices.Equal(s.Path, path) {
			if s.Key >= 0 {
				return s.Key, true
			}
			return s.Start, true
		}
	}
	return 0, false
}
