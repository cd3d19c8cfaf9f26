package provenance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFunctionCheck(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "f")
	os.WriteFile(prog, []byte("#!/bin/sh\necho 1\n"), 0o755)
	old, err := FunctionOf("./f", prog, "")
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir, "g")
	os.WriteFile(moved, []byte("#!/bin/sh\necho 1\n"), 0o755)
	changed := filepath.Join(dir, "h")
	os.WriteFile(changed, []byte("#!/bin/sh\necho 2\n"), 0o755)
	of := func(spec, path, args string) Function {
		f, err := FunctionOf(spec, path, args)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name  string
		now   Function
		old   Function
		trust bool
		err   string // "" passes
		note  string
	}{
		{"same", of("./f", prog, ""), old, false, "", ""},
		{"moved, same bytes", of("./g", moved, ""), old, false, "", ""},
		{"same built-in", of("builtin:sum", "", ""), of("builtin:sum", "", ""), false, "", ""},
		{"another built-in", of("builtin:sum", "", ""), of("builtin:swcell", "", ""), false, "computed by builtin:swcell, not builtin:sum. To resume", ""},
		{"a built-in for a program", of("builtin:sum", "", ""), old, false, "computed by ./f, not builtin:sum", ""},
		{"another program", of("./h", changed, ""), old, false, "computed by ./f, not ./h", ""},
		{"other arguments", of("./f", prog, "-x"), old, false, `extra arguments "", not "-x"`, ""},
		{"trusted", of("./h", changed, ""), old, true, "", "its cells are kept, as --trust-checkpoint asks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			note, err := tt.now.Check(tt.old, "ck.matrix", tt.trust)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error = %v, want %q", err, tt.err)
			}
			if !strings.Contains(note, tt.note) || tt.note == "" && note != "" {
				t.Errorf("note = %q, want %q", note, tt.note)
			}
		})
	}

	// The same file changed in place: the hint offers --trust-checkpoint.
	os.WriteFile(prog, []byte("#!/bin/sh\necho 3\n"), 0o755)
	_, err = of("./f", prog, "").Check(old, "ck.matrix", false)
	if err == nil || !strings.Contains(err.Error(), "./f has changed since they were computed (sha256 ") || !strings.Contains(err.Error(), "--trust-checkpoint") {
		t.Errorf("a program changed in place: %v", err)
	}
}

func TestStampDiff(t *testing.T) {
	s := Stamp{Size: 10, ModTime: 5e18}
	for _, tt := range []struct {
		now  Stamp
		want string
	}{
		{s, ""},
		{Stamp{Size: 12, ModTime: s.ModTime}, "size 10 → 12 bytes"},
		{Stamp{Size: 10, ModTime: s.ModTime + 1}, "modified "},
	} {
		if got := tt.now.Diff(s); !strings.HasPrefix(got, tt.want) || (tt.want == "") != (got == "") {
			t.Errorf("Diff(%+v) = %q, want %q", tt.now, got, tt.want)
		}
	}
}
