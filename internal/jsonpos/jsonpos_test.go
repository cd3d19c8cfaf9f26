package jsonpos

import (
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
