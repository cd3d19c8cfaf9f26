package jsonpos

import (
	"slices"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type v struct {
		N int `json:"n"`
	}
	tests := []struct {
		src       string
		want      string // in the error; "" for none
		line, col int    // of the error, where it has one
	}{
		{`{"n": 1}`, "", 0, 0},
		{"{\n\"n\": \"one\"}", "cannot unmarshal", 2, 10}, // the end of the value
		{"{\n  \"n\": 1,\n}", "invalid character", 3, 1},
		{`{"m": 1}`, `unknown field "m"`, 0, 0},
		{`{"n": 1} {}`, "unexpected data after", 0, 0},
	}
	for _, tt := range tests {
		var x v
		err := Decode([]byte(tt.src), &x)
		if tt.want == "" {
			if err != nil || x.N != 1 {
				t.Errorf("Decode(%q) = %v, %+v", tt.src, err, x)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q) = %v, want %q", tt.src, err, tt.want)
			continue
		}
		off, ok := Offset(err)
		if tt.line == 0 {
			if ok {
				t.Errorf("Decode(%q): an offset for %v", tt.src, err)
			}
			continue
		}
		if line, col := LineCol([]byte(tt.src), off); !ok || line != tt.line || col != tt.col {
			t.Errorf("Decode(%q): %v at %d:%d, want %d:%d", tt.src, err, line, col, tt.line, tt.col)
		}
	}
}

// TestSpans: every value's path, key and extent in the text.
func TestSpans(t *testing.T) {
	src := "{\"a\": [1, {\"b\": \"x\"}],\n \"c\" : true}"
	want := []Span{
		{Path: nil, Key: -1, Start: 0, End: int64(len(src))},
		{Path: []string{"a"}, Key: 1, Start: 6, End: 21},
		{Path: []string{"a", "0"}, Key: -1, Start: 7, End: 8},
		{Path: []string{"a", "1"}, Key: -1, Start: 10, End: 20},
		{Path: []string{"a", "1", "b"}, Key: 11, Start: 16, End: 19},
		{Path: []string{"c"}, Key: 24, Start: 30, End: 34},
	}
	got, err := Spans([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Spans = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.Path, w.Path) || g.Key != w.Key || g.Start != w.Start || g.End != w.End {
			t.Errorf("span %d = %+v, want %+v", i, g, w)
		}
	}
	for _, bad := range []string{`{"a": }`, `[1,`, ``} {
		if _, err := Spans([]byte(bad)); err == nil {
			t.Errorf("Spans(%q): no error", bad)
		}
	}
}
