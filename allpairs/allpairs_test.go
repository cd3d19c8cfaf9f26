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
	"testing"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/multicore"
)

func makeSet(t *testing.T, names ...string) *allpairs.Set {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		write(t, filepath.Join(dir, n), n)
	}
	s, err := allpairs.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sortedLines(b []byte) []string {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(lines)
	return lines
}

func TestRunOutput(t *testing.T) {
	a := makeSet(t, "ab", "abc")
	b := makeSet(t, "abd", "x")
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	var out bytes.Buffer
	var progress []int64
	sum, err := allpairs.Run(context.Background(), &allpairs.Problem{A: a, B: b, Func: f, OnProgress: func(n int64) { progress = append(progress, n) }}, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ab\tabd\t1", "ab\tx\t2", "abc\tabd\t1", "abc\tx\t3"}
	if got := sortedLines(out.Bytes()); !slices.Equal(got, want) {
		t.Errorf("output = %q, want %q", got, want)
	}
	if sum.Done != 4 || sum.Failed != 0 || progress[len(progress)-1] != 4 {
		t.Errorf("summary %+v, progress %v", sum, progress)
	}
}

func TestRunSymmetricNeedsSameSet(t *testing.T) {
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	_, err := allpairs.Run(context.Background(), &allpairs.Problem{A: makeSet(t, "a"), B: makeSet(t, "b"), Func: f, Symmetric: true}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "same set") {
		t.Errorf("error = %v, want one about the same set", err)
	}
}

func TestRunBadRegion(t *testing.T) {
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	p := &allpairs.Problem{A: makeSet(t, "a", "b"), B: makeSet(t, "c"), Func: f, Region: &multicore.Region{X: 1, Y: 0, W: 2, H: 1}}
	if _, err := allpairs.Run(context.Background(), p, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "not inside the 2×1 matrix") {
		t.Errorf("error = %v", err)
	}
}

func TestRunFailures(t *testing.T) {
	a := makeSet(t, "good1", "bad", "good2")
	prog := testutil.WriteScript(t, t.TempDir(), "cmp", `case "$1" in *bad) echo "no iris found in $1" >&2; exit 7;; esac; echo match`)
	f, _ := funcs.NewRegistry().OpenPair(prog, funcs.Options{})
	defer f.Close()
	var out bytes.Buffer
	var reported []string
	p := &allpairs.Problem{A: a, B: a, Func: f, OnFailure: func(ce *allpairs.CellError) { reported = append(reported, ce.Error()) }}
	sum, err := allpairs.Run(context.Background(), p, &out)
	var fe *allpairs.FailedError
	if !errors.As(err, &fe) || fe.Failed != 3 || fe.Cells != 9 {
		t.Fatalf("error = %v, want 3 of 9 cells failed", err)
	}
	if got := len(sortedLines(out.Bytes())); got != 6 {
		t.Errorf("%d result lines, want the 6 that succeeded:\n%s", got, out.Bytes())
	}
	if len(reported) != 3 || !strings.Contains(reported[0], "cell bad × ") || !strings.Contains(reported[0], "exited with status 7") || !strings.Contains(reported[0], "no iris found") {
		t.Errorf("reported %q", reported)
	}
	if sum.Done != 9 || sum.Failed != 3 {
		t.Errorf("summary %+v", sum)
	}
}

func ExampleRun() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	for name, data := range map[string]string{"alice": "GATTACA", "bob": "GACTACA", "carol": "GATTACC"} {
		os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
	}
	set, _ := allpairs.ReadSet(dir)
	f, _ := funcs.NewRegistry().OpenPair("builtin:bytediff", funcs.Options{})
	var out bytes.Buffer
	allpairs.Run(context.Background(), &allpairs.Problem{A: set, B: set, Func: f, Symmetric: true}, &out)
	for _, line := range sortedLines(out.Bytes()) {
		fmt.Println(line)
	}
	// Output:
	// alice	alice	0
	// alice	bob	1
	// alice	carol	1
	// bob	bob	0
	// bob	carol	2
	// carol	carol	0
}
