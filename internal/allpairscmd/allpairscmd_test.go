package allpairscmd

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/testutil"
)

var binDir, cacheDir string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		binDir = dir
		// The checkpoints of runs on standard output go to the cache
		// directory: the tests', not the user's.
		cacheDir = filepath.Join(dir, "cache")
		os.Setenv("XDG_CACHE_HOME", cacheDir)
	}, "allpairs", "workqueue"))
}

// runMain runs the command in-process and returns its exit code, stdout and
// stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, cmdutil.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func sorted(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines
}

// dataDir writes n random files of random length into a new directory.
func dataDir(t *testing.T, rng *rand.Rand, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		data := make([]byte, rng.IntN(5000))
		for k := range data {
			data[k] = byte(rng.IntN(4))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("item%02d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// naive is the reference: a plain double loop over the directories.
func naive(t *testing.T, a, b string, symmetric bool) []string {
	ea, _ := os.ReadDir(a)
	eb, _ := os.ReadDir(b)
	var lines []string
	for i, x := range ea {
		for j, y := range eb {
			if symmetric && i > j {
				continue
			}
			da, _ := os.ReadFile(filepath.Join(a, x.Name()))
			db, _ := os.ReadFile(filepath.Join(b, y.Name()))
			n := max(len(da), len(db))
			d := 0
			for k := 0; k < n; k++ {
				if k >= len(da) || k >= len(db) || da[k] != db[k] {
					d++
				}
			}
			lines = append(lines, fmt.Sprintf("%s\t%s\t%d", x.Name(), y.Name(), d))
		}
	}
	slices.Sort(lines)
	return lines
}

func TestEveryFunctionKindMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a, b := dataDir(t, rng, 9), dataDir(t, rng, 6)
	lib := testutil.BuildSharedLib(t, "../../funcs/testdata/bytediff.c")
	prog := testutil.BuildProgram(t, "../../multicore/testdata/bytediff_prog.c")
	want := naive(t, a, b, false)
	wantSym := naive(t, a, a, true)
	for _, fn := range []string{"builtin:bytediff", "BITWISE", lib, prog} {
		for _, extra := range [][]string{nil, {"-b", "2", "-c", "1"}, {"-b", "4", "-c", "3"}} {
			args := append(append([]string{}, extra...), fn, a, b)
			code, out, errs := runMain(t, args...)
			if code != 0 || errs != "" {
				t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
			}
			if got := sorted(out); !slices.Equal(got, want) {
				t.Errorf("%v: output differs from the naive loop:\n got %q\nwant %q", args, got, want)
			}
		}
		code, out, _ := runMain(t, "--symmetric", "-b", "3", fn, a, a)
		if got := sorted(out); code != 0 || !slices.Equal(got, wantSym) {
			t.Errorf("%s --symmetric: exit %d, output differs:\n got %q\nwant %q", fn, code, got, wantSym)
		}
	}
}

func TestSubproblemsUnionIsWholeRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	a, b := dataDir(t, rng, 11), dataDir(t, rng, 8)
	for _, symmetric := range []bool{false, true} {
		bdir := b
		if symmetric {
			bdir = a
		}
		flags := []string{}
		if symmetric {
			flags = append(flags, "--symmetric")
		}
		_, whole, _ := runMain(t, append(flags, "builtin:bytediff", a, bdir)...)
		nA, nB := 11, 8
		if symmetric {
			nB = 11
		}
		// Cut the matrix into a random grid of rectangles.
		var union []string
		xs := cuts(rng, nA)
		ys := cuts(rng, nB)
		for xi := 0; xi+1 < len(xs); xi++ {
			for yi := 0; yi+1 < len(ys); yi++ {
				args := append(append([]string{}, flags...), "-M",
					"-X", fmt.Sprint(xs[xi]+1), "-Y", fmt.Sprint(ys[yi]+1),
					"-W", fmt.Sprint(xs[xi+1]-xs[xi]), "-H", fmt.Sprint(ys[yi+1]-ys[yi]),
					"builtin:bytediff", a, bdir)
				code, out, errs := runMain(t, args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errs)
				}
				union = append(union, sorted(out)...)
			}
		}
		slices.Sort(union)
		if !slices.Equal(union, sorted(whole)) {
			t.Errorf("symmetric=%v: union of sub-problems (%d lines) differs from the whole run (%d lines)", symmetric, len(union), len(sorted(whole)))
		}
	}
	// Defaults: -W and -H run to the end of the sets.
	_, whole, _ := runMain(t, "builtin:bytediff", a, b)
	_, first, _ := runMain(t, "-M", "-W", "5", "builtin:bytediff", a, b)
	_, rest, _ := runMain(t, "-M", "-X", "6", "builtin:bytediff", a, b)
	if got := sorted(first + rest); !slices.Equal(got, sorted(whole)) {
		t.Errorf("-W 5 and -X 6 do not make the whole run")
	}
}

// cuts returns sorted cut points 0 = c0 < c1 < ... < ck = n.
func cuts(rng *rand.Rand, n int) []int {
	c := []int{0}
	for i := 1; i < n; i++ {
		if rng.IntN(3) == 0 {
			c = append(c, i)
		}
	}
	return append(c, n)
}

func TestOutputFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	a := dataDir(t, rng, 3)
	out := filepath.Join(t.TempDir(), "m.txt")
	code, stdout, _ := runMain(t, "-o", out, "builtin:bytediff", a, a)
	data, _ := os.ReadFile(out)
	if code != 0 || stdout != "" || len(sorted(string(data))) != 9 {
		t.Errorf("exit %d, stdout %q, file %q", code, stdout, data)
	}
}

func TestErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	a := dataDir(t, rng, 3)
	scripts := t.TempDir()
	empty := t.TempDir()
	garbage := filepath.Join(scripts, "garbage.so")
	os.WriteFile(garbage, []byte("not a library"), 0o644)
	fails := testutil.WriteScript(t, scripts, "fails", `case "$1" in *item01) echo "cannot read template of $1" >&2; exit 3;; esac; echo 1`)
	crashes := testutil.WriteScript(t, scripts, "crashes", `case "$2" in *item02) kill -SEGV $$;; esac; echo 1`)
	hangs := testutil.WriteScript(t, scripts, "hangs", `case "$1$2" in *item00*item00) echo "stuck" >&2; exec sleep 60;; esac; echo 1`)

	tests := []struct {
		name      string
		args      []string
		code      int
		stderr    []string
		goodLines int
	}{
		{"exit status", []string{fails, a, a}, 1, []string{"cell item01 × item00", "exited with status 3", "cannot read template of", "3 of 9 cells failed", "the 6 that succeeded were written"}, 6},
		{"signal", []string{crashes, a, a}, 1, []string{"cell item00 × item02", "killed by signal 11", "3 of 9 cells failed"}, 6},
		{"timeout", []string{"--timeout", "300ms", hangs, a, a}, 1, []string{"cell item00 × item00", "timed out after 300ms", "stuck", "1 of 9 cells failed"}, 8},
		{"missing input", []string{"builtin:bytediff", filepath.Join(a, "nope"), a}, 1, []string{"nope: no such file or directory"}, 0},
		{"empty input", []string{"builtin:bytediff", a, empty}, 1, []string{"the directory has no files"}, 0},
		{"unloadable library", []string{garbage, a, a}, 1, []string{"cannot load " + garbage}, 0},
		{"missing function", []string{"./no-such-compare", a, a}, 1, []string{"function ./no-such-compare: no such file"}, 0},
		{"unknown flag", []string{"--bogus", "builtin:bytediff", a, a}, 2, []string{"unknown flag: --bogus", "--help"}, 0},
		{"too few args", []string{"builtin:bytediff", a}, 2, []string{"expected 3 arguments (allpairs [flags] FUNC A B), got 2: builtin:bytediff "}, 0},
		{"extra args for builtin", []string{"-e", "-x", "builtin:bytediff", a, a}, 2, []string{"--extra-args applies only to program functions"}, 0},
		{"bad quoting", []string{"-e", "'x", fails, a, a}, 2, []string{"unterminated quote"}, 0},
		{"sub-problem outside", []string{"-M", "-X", "3", "-W", "5", "builtin:bytediff", a, a}, 2, []string{"allpairs: -X 3 -W 5: rows 3…7 and columns 1…3 are not inside the 3×3 matrix"}, 0},
		{"sub-problem past the last row", []string{"-M", "-X", "5", "builtin:bytediff", a, a}, 2, []string{"allpairs: -X 5: the 3×3 matrix has rows 1…3\n"}, 0},
		{"sub-problem past the last column", []string{"-M", "-Y", "4", "-W", "1", "builtin:bytediff", a, a}, 2, []string{"allpairs: -Y 4: the 3×3 matrix has columns 1…3\n"}, 0},
		{"sub-problem from 0", []string{"-M", "-X", "0", "builtin:bytediff", a, a}, 2, []string{"-X 0 -Y 1: rows and columns are counted from 1"}, 0},
		{"-o in a missing directory", []string{"-o", filepath.Join(empty, "nodir", "out"), "builtin:bytediff", a, a}, 2, []string{"-o " + filepath.Join(empty, "nodir", "out") + ": directory " + filepath.Join(empty, "nodir") + " does not exist"}, 0},
		{"-o under a file", []string{"-o", filepath.Join(garbage, "out"), "builtin:bytediff", a, a}, 2, []string{"-o " + filepath.Join(garbage, "out") + ": " + garbage + " is not a directory"}, 0},
		{"-o a directory", []string{"-o", empty, "builtin:bytediff", a, a}, 2, []string{"-o " + empty + ": is a directory"}, 0},
		{"--matrix in a missing directory", []string{"--matrix", filepath.Join(empty, "nodir", "m"), "builtin:bytediff", a, a}, 2, []string{"--matrix " + filepath.Join(empty, "nodir", "m") + ": directory " + filepath.Join(empty, "nodir") + " does not exist"}, 0},
		{"arguments in CCTools' order", []string{a, a, "builtin:bytediff"}, 2, []string{"builtin:bytediff is a function: allpairs takes FUNC A B, in that order"}, 0},
		{"directory as function", []string{a, a, a}, 2, []string{a + " is a directory, not a function: allpairs takes FUNC A B, in that order"}, 0},
		{"-o an item", []string{"-o", filepath.Join(a, "item01"), "builtin:bytediff", a, a}, 2, []string{"-o " + filepath.Join(a, "item01") + " is item item01 of " + a + ": the results would overwrite it"}, 0},
		{"--matrix the function", []string{"--matrix", fails, fails, a, a}, 2, []string{"--matrix " + fails + " is the function: the results would overwrite it"}, 0},
		{"symmetric different sets", []string{"--symmetric", "builtin:bytediff", a, dataDir(t, rng, 2)}, 2, []string{"same set"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runMain(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, errs)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
			if got := len(sorted(out)); got != tt.goodLines {
				t.Errorf("%d result lines, want %d", got, tt.goodLines)
			}
		})
	}
}

// TestUnreadableInput runs the real binary as an unprivileged user, since
// root can read any file.
func TestUnreadableInput(t *testing.T) {
	dir, err := os.MkdirTemp("", "allpairs-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	for _, n := range []string{"a", "b"} {
		os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644)
	}
	os.Chmod(filepath.Join(dir, "b"), 0)
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "builtin:bytediff", dir, dir)
	if os.Getuid() == 0 {
		os.Chmod(binDir, 0o755)
		os.Chmod(filepath.Join(binDir, "allpairs"), 0o755)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "b: not readable: permission denied") {
		t.Errorf("got %v, %q; want exit 1 and 'b: not readable: permission denied'", err, out)
	}
}

// TestInterrupt sends SIGINT to a running allpairs: it must stop, exit 130,
// and have written the cells it finished.
func TestInterrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	a := dataDir(t, rng, 20)
	slow := testutil.WriteScript(t, t.TempDir(), "slow", "sleep 0.02; echo 1")
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), slow, a, a)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130; stderr %q", err, errb.String())
	}
	n := len(sorted(out.String()))
	if n == 0 || n >= 400 || !strings.Contains(errb.String(), fmt.Sprintf("interrupted after %d of 400 cells", n)) {
		t.Errorf("%d lines written; stderr %q", n, errb.String())
	}
}
