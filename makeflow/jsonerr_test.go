package makeflow

import (
	"context"
	"testing"

	"github.com/rightsize/rightsize/jx"
)

// TestJXTextAt: the paths of a JX value are found at their keys, one
// lookup after another on the same value.
func TestJXTextAt(t *testing.T) {
	src := "{\"a\": {\"b\": 1},\n \"c\": [{\"d\": 2}, 3]}"
	x, err := jx.Parse("t.jx", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jx.Eval(context.Background(), x, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jx.MarshalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	text := jxText(v, raw, Pos{File: "t.jx", Line: 1, Col: 1})
	tests := []struct {
		path []string
		want string
	}{
		{[]string{"a", "b"}, "t.jx:1:8"},
		{[]string{"c", "0", "d"}, "t.jx:2:9"},
		{[]string{"c", "1"}, "t.jx:2:2"}, // a number has no position: its key's
		{[]string{"a"}, "t.jx:1:2"},
		{[]string{"x"}, "t.jx:1:1"}, // nowhere: the value's own
		{nil, "t.jx:1:1"},
	}
	for _, tt := range tests {
		if got := text.at(tt.path).String(); got != tt.want {
			t.Errorf("at(%q) = %s, want %s", tt.path, got, tt.want)
		}
	}
}
