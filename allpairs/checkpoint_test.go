package allpairs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
)

var bytediff = funcs.Info{Kind: funcs.GoFunc, Name: "builtin:bytediff"}

// readSet reads the set in dir.
func readSet(t *testing.T, dir string) *allpairs.Set {
	t.Helper()
	s, err := allpairs.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill opens a new checkpoint for of at path and puts every cell of it
// there, with the value "x,y".
func fill(t *testing.T, path string, of allpairs.CheckpointOf) {
	t.Helper()
	ck, err := allpairs.OpenCheckpoint(path, of)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for x := range of.A.Items {
		for y := range of.B.Items {
			if !of.Symmetric || x <= y {
				if _, err := ck.Add(x, y, fmt.Appendf(nil, "%d,%d", x, y)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// cellsOf lists the cells of the checkpoint as "x,y" strings, sorted.
func cellsOf(t *testing.T, ck *allpairs.Checkpoint, n, m int) []string {
	var cells []string
	for x := range n {
		for y := range m {
			if ck.Has(x, y) {
				cells = append(cells, fmt.Sprintf("%d,%d", x, y))
			}
		}
	}
	return cells
}

// TestCheckpointProvenance: a checkpoint reopened for the same problem
// keeps its cells; for changed items it drops their rows or columns; for
// another function or other items it refuses.
func TestCheckpointProvenance(t *testing.T) {
	script := testutil.WriteScript(t, t.TempDir(), "f", `echo 1`)
	program := funcs.Info{Kind: funcs.Program, Name: script, Path: script}
	tests := []struct {
		name string
		// change changes the problem after the checkpoint is filled; it
		// returns the problem to reopen the checkpoint for.
		change  func(t *testing.T, of allpairs.CheckpointOf, adir, bdir string) allpairs.CheckpointOf
		fn      *funcs.Info // the function the checkpoint is filled with, if not bytediff
		same    bool        // B is A
		cells   []string
		changes []string
		err     string
	}{
		{name: "same problem", change: func(_ *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf { return of },
			cells: all(3, 2)},
		{name: "an item of A changed", change: func(t *testing.T, of allpairs.CheckpointOf, adir, _ string) allpairs.CheckpointOf {
			write(t, filepath.Join(adir, "a1"), "longer")
			of.A = readSet(t, adir)
			return of
		}, cells: []string{"0,0", "0,1", "2,0", "2,1"}, changes: []string{"/a1 changed since the checkpoint (size 2 → 6 bytes): its row will be computed again"}},
		{name: "an item of B touched", change: func(t *testing.T, of allpairs.CheckpointOf, _, bdir string) allpairs.CheckpointOf {
			later := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(bdir, "b0"), later, later)
			of.B = readSet(t, bdir)
			return of
		}, cells: []string{"0,1", "1,1", "2,1"}, changes: []string{"/b0 changed since the checkpoint (modified ", "its column will be computed again"}},
		{name: "an item of A = B changed", same: true, change: func(t *testing.T, of allpairs.CheckpointOf, adir, _ string) allpairs.CheckpointOf {
			write(t, filepath.Join(adir, "a2"), "x")
			of.A = readSet(t, adir)
			of.B = of.A
			return of
		}, cells: []string{"0,0", "0,1", "1,0", "1,1"}, changes: []string{"/a2 changed since the checkpoint (size 2 → 1 bytes): its row and column will be computed again"}},
		{name: "full to symmetric", same: true, change: func(_ *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf {
			of.Symmetric = true
			return of
		}, cells: []string{"0,0", "0,1", "0,2", "1,1", "1,2", "2,2"}},
		{name: "another built-in", change: func(_ *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf {
			of.Func = funcs.Info{Kind: funcs.GoFunc, Name: "builtin:swalign"}
			return of
		}, err: "holds cells of another function: they were computed by builtin:bytediff, not builtin:swalign. To resume, give the function they were computed with; or remove "},
		{name: "another built-in, trusted", change: func(_ *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf {
			of.Func, of.TrustCheckpoint = funcs.Info{Kind: funcs.GoFunc, Name: "builtin:swalign"}, true
			return of
		}, cells: all(3, 2), changes: []string{"they were computed by builtin:bytediff, not builtin:swalign; its cells are kept, as --trust-checkpoint asks"}},
		{name: "a program changed", fn: &program, change: func(t *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf {
			testutil.WriteScript(t, filepath.Dir(script), "f", `echo 2`)
			return of
		}, err: script + " has changed since they were computed (sha256 "},
		{name: "other arguments", change: func(_ *testing.T, of allpairs.CheckpointOf, _, _ string) allpairs.CheckpointOf {
			of.Args = "-t 0.5"
			return of
		}, err: `they were computed with the extra arguments "", not "-t 0.5"`},
		{name: "an item added", change: func(t *testing.T, of allpairs.CheckpointOf, adir, _ string) allpairs.CheckpointOf {
			write(t, filepath.Join(adir, "a3"), "a3")
			of.A = readSet(t, adir)
			return of
		}, err: "holds cells of other items: set A (", changes: nil},
		{name: "an item renamed", change: func(t *testing.T, of allpairs.CheckpointOf, _, bdir string) allpairs.CheckpointOf {
			os.Rename(filepath.Join(bdir, "b1"), filepath.Join(bdir, "c1"))
			of.B = readSet(t, bdir)
			return of
		}, err: `has "c1" as item 2, where the checkpoint's items had "b1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adir, bdir := t.TempDir(), t.TempDir()
			for _, n := range []string{"a0", "a1", "a2"} {
				write(t, filepath.Join(adir, n), n)
			}
			for _, n := range []string{"b0", "b1"} {
				write(t, filepath.Join(bdir, n), n)
			}
			of := allpairs.CheckpointOf{A: readSet(t, adir), B: readSet(t, bdir), Func: bytediff}
			if tt.same {
				of.B = of.A
			}
			if tt.fn != nil {
				of.Func = *tt.fn
			}
			path := filepath.Join(t.TempDir(), "ck.matrix")
			fill(t, path, of)
			before, _ := os.ReadFile(path)
			of = tt.change(t, of, adir, bdir)
			ck, err := allpairs.OpenCheckpoint(path, of)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %q", err, tt.err)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
					t.Errorf("a refused checkpoint was changed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if got := cellsOf(t, ck, len(of.A.Items), len(of.B.Items)); !slices.Equal(got, tt.cells) {
				t.Errorf("cells kept %v, want %v", got, tt.cells)
			}
			if ck.Resumed() != int64(len(tt.cells)) {
				t.Errorf("Resumed = %d, want %d", ck.Resumed(), len(tt.cells))
			}
			if len(ck.Changes()) != min(len(tt.changes), 1) {
				t.Errorf("changes %q, want %q", ck.Changes(), tt.changes)
			}
			for _, want := range tt.changes {
				if len(ck.Changes()) > 0 && !strings.Contains(ck.Changes()[0], want) {
					t.Errorf("changes %q, want %q", ck.Changes(), want)
				}
			}
			// What was dropped is gone from the file too.
			if m, err := sparsematrix.Load(path); err != nil || len(m) != len(tt.cells) {
				t.Errorf("the file holds %d cells (%v), want %d", len(m), err, len(tt.cells))
			}
		})
	}
}

func all(n, m int) []string {
	var cells []string
	for x := range n {
		for y := range m {
			cells = append(cells, fmt.Sprintf("%d,%d", x, y))
		}
	}
	return cells
}

// TestCheckpointWithoutRecord: a file an older rightsize wrote (no header)
// is taken as it is if its cells fit the matrix, and refused otherwise; a
// Wavefront checkpoint is refused.
func TestCheckpointWithoutRecord(t *testing.T) {
	set := makeSet(t, "a", "b")
	of := allpairs.CheckpointOf{A: set, B: set, Func: bytediff}
	dir := t.TempDir()
	old := filepath.Join(dir, "old.matrix")
	os.WriteFile(old, []byte("0 1 1\n1\n1 1 1\n0\n"), 0o644)
	ck, err := allpairs.OpenCheckpoint(old, of)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Resumed() != 2 || len(ck.Changes()) != 1 || !strings.Contains(ck.Changes()[0], "does not say what its 2 cells were computed from") {
		t.Errorf("resumed %d, changes %q", ck.Resumed(), ck.Changes())
	}
	ck.Close()
	if ck, err = allpairs.OpenCheckpoint(old, of); err != nil || len(ck.Changes()) != 0 {
		t.Fatalf("reopened: %v, changes %q", err, ck.Changes())
	}
	ck.Close()

	outside := filepath.Join(dir, "outside.matrix")
	os.WriteFile(outside, []byte("0 1 1\n1\n5 1 1\n0\n"), 0o644)
	if _, err := allpairs.OpenCheckpoint(outside, of); err == nil || !strings.Contains(err.Error(), "cell (5,1) is not a cell of this 2×2 problem") {
		t.Errorf("a file of a larger problem: %v", err)
	}

	wf := filepath.Join(dir, "R.matrix")
	w, _ := sparsematrix.Open(wf, nil)
	w.Rewrite([]byte(`{"abstraction":"wavefront"}`), nil)
	w.Close()
	if _, err := allpairs.OpenCheckpoint(wf, of); err == nil || !strings.Contains(err.Error(), "is not an All-Pairs checkpoint") {
		t.Errorf("a Wavefront checkpoint: %v", err)
	}

	ck, _ = allpairs.OpenCheckpoint(old, of)
	defer ck.Close()
	if _, err := allpairs.OpenCheckpoint(old, of); !errors.Is(err, sparsematrix.ErrLocked) {
		t.Errorf("a checkpoint in use: %v, want ErrLocked", err)
	}
}

// TestRunResumes: Run with a checkpoint computes only the cells it lacks,
// appends them to it, and writes the lines of all.
func TestRunResumes(t *testing.T) {
	a := makeSet(t, "ab", "abc", "x")
	var calls atomic.Int64
	f := funcs.NewGoPair("builtin:counted", func(x, y []byte) ([]byte, error) {
		calls.Add(1)
		return funcs.ByteDiff(x, y)
	}, funcs.Options{})
	path := filepath.Join(t.TempDir(), "ck.matrix")
	of := allpairs.CheckpointOf{A: a, B: a, Func: f.Info()}
	ck, err := allpairs.OpenCheckpoint(path, of)
	if err != nil {
		t.Fatal(err)
	}
	ck.Add(0, 1, []byte("kept"))
	ck.Add(2, 2, []byte("kept\ttoo"))
	var out bytes.Buffer
	var progress []int64
	sum, err := allpairs.Run(context.Background(), &allpairs.Problem{A: a, B: a, Func: f, Checkpoint: ck, Cores: 2,
		OnProgress: func(n int64) { progress = append(progress, n) }}, &out)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
	want := []string{"ab\tab\t0", "ab\tabc\tkept", "ab\tx\t2", "abc\tab\t1", "abc\tabc\t0", "abc\tx\t3", "x\tab\t2", "x\tabc\t3", `x` + "\tx\t" + `kept\ttoo`}
	if got := sortedLines(out.Bytes()); !slices.Equal(got, want) {
		t.Errorf("lines:\n%q\nwant\n%q", got, want)
	}
	if calls.Load() != 7 || sum.Resumed != 2 || sum.Done != 7 || progress[0] != 2 || progress[len(progress)-1] != 9 {
		t.Errorf("%d calls, summary %+v, progress %v", calls.Load(), sum, progress)
	}
	if m, err := sparsematrix.Load(path); err != nil || len(m) != 9 {
		t.Errorf("the checkpoint holds %d cells (%v), want 9", len(m), err)
	}
}

// TestLinesEscaped: a result of several lines, or a name holding a tab,
// stays one line of three fields.
func TestLinesEscaped(t *testing.T) {
	a := makeSet(t, "tab\there", `back\slash`)
	f := funcs.NewGoPair("builtin:lines", func(x, y []byte) ([]byte, error) {
		return []byte("line 1\nline 2\r\n\tend\\"), nil
	}, funcs.Options{})
	var out bytes.Buffer
	if _, err := allpairs.Run(context.Background(), &allpairs.Problem{A: a, B: a, Func: f}, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`back\\slash` + "\t" + `back\\slash` + "\t" + `line 1\nline 2\r\n\tend\\`,
		`back\\slash` + "\t" + `tab\there` + "\t" + `line 1\nline 2\r\n\tend\\`,
		`tab\there` + "\t" + `back\\slash` + "\t" + `line 1\nline 2\r\n\tend\\`,
		`tab\there` + "\t" + `tab\there` + "\t" + `line 1\nline 2\r\n\tend\\`,
	}
	if got := sortedLines(out.Bytes()); !slices.Equal(got, want) {
		t.Errorf("lines:\n%q\nwant\n%q", got, want)
	}
}

// TestCheckpointAddRecords: a batch of cells is written once each, those
// already in the checkpoint skipped, and one outside the matrix refuses the
// whole batch; reopened, the file holds what was added.
func TestCheckpointAddRecords(t *testing.T) {
	set := makeSet(t, "a", "b", "c")
	of := allpairs.CheckpointOf{A: set, B: set, Func: bytediff}
	path := filepath.Join(t.TempDir(), "out.matrix")
	ck, err := allpairs.OpenCheckpoint(path, of)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(x, y int) sparsematrix.Record {
		return sparsematrix.Record{X: x, Y: y, Value: fmt.Appendf(nil, "%d,%d", x, y)}
	}
	if _, err := ck.Add(0, 0, []byte("0,0")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		recs    []sparsematrix.Record
		added   int
		wantErr string
	}{
		{"new, old and twice", []sparsematrix.Record{rec(0, 0), rec(0, 1), rec(2, 2), rec(0, 1)}, 2, ""},
		{"outside the matrix", []sparsematrix.Record{rec(1, 1), rec(3, 0)}, 0, "cell (3,0) is outside the 3×3 matrix"},
		{"negative", []sparsematrix.Record{rec(1, 1), {X: -1, Y: 0}}, 0, "cell (-1,0) is outside"},
		{"none", nil, 0, ""},
	} {
		added, err := ck.AddRecords(tc.recs)
		if added != tc.added || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: added %d, %v; want %d, %q", tc.name, added, err, tc.added, tc.wantErr)
		}
	}
	if ck.Cells() != 3 {
		t.Errorf("%d cells, want 3", ck.Cells())
	}
	ck.Close()
	var records int
	if err := sparsematrix.Scan(path, func(sparsematrix.Record) error { records++; return nil }); err != nil {
		t.Fatal(err)
	}
	if records != 3 {
		t.Errorf("the file holds %d records, want 3 (each cell once)", records)
	}
	ck, err = allpairs.OpenCheckpoint(path, of)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if got, want := cellsOf(t, ck, 3, 3), []string{"0,0", "0,1", "2,2"}; !slices.Equal(got, want) {
		t.Errorf("reopened: cells %v, want %v", got, want)
	}
}
