// Package jsonpos decodes the JSON files users write (workflows, scenarios)
// strictly — unknown keys and trailing data are errors, since a typo in a
// key would otherwise be ignored — and says where in the text a decoding
// error is.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
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
