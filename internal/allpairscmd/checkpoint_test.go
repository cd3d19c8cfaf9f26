package allpairscmd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
)

// loggingFunc writes a program that logs each call's two item names to log
// and prints the number of differing bytes (cmp), after sleeping delay.
func loggingFunc(t *testing.T, log, delay string) string {
	t.Helper()
	return testutil.WriteScript(t, t.TempDir(), "f", `printf '%s %s\n' "$(basename "$1")" "$(basename "$2")" >> `+log+`
sleep `+delay+`
cmp -l "$1" "$2" 2>/dev/null | wc -l`)
}

// calls returns the calls logged, sorted, and empties the log.
func calls(t *testing.T, log string) []string {
	t.Helper()
	data, _ := os.ReadFile(log)
	os.Remove(log)
	return sorted(string(data))
}

// waitCells waits until the sparse-matrix file matching pattern holds at
// least n cells and returns its path.
func waitCells(t *testing.T, pattern string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if m, err := sparsematrix.Load(p); err == nil && len(m) >= n {
				return p
			}
		}
	}
	t.Fatalf("no checkpoint %s with %d cells after 60s", pattern, n)
	return ""
}

// interrupt sends SIGINT to the run that wait waits for and checks that it
// exits 130, returning its standard error.
func interrupt(t *testing.T, cmd *exec.Cmd, wait func() (int, string, string)) string {
	t.Helper()
	cmd.Process.Signal(os.Interrupt)
	code, _, errs := wait()
	if code != 130 {
		t.Fatalf("interrupted run: exit %d, want 130; stderr:\n%s", code, errs)
	}
	return errs
}

// start starts the real allpairs binary in dir.
func start(t *testing.T, dir string, args ...string) (*exec.Cmd, func() (int, string, string)) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, func() (int, string, string) {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	}
}

// TestResumeAfterInterrupt is issue 10's item 16: the default (multicore)
// allpairs, interrupted, resumes where it stopped — on standard output
// (checkpoint in the cache directory) and with -o (beside the output) —
// computing only the cells it lacks; the checkpoint is removed once the
// result is whole.
func TestResumeAfterInterrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	a := dataDir(t, rng, 12)
	log := filepath.Join(t.TempDir(), "calls")
	fn := loggingFunc(t, log, "0.02")
	_, want, _ := runBinary(t, t.TempDir(), fn, a, a)
	os.Remove(log)
	// A cache directory of its own, where no other test left a checkpoint.
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	cache = filepath.Join(cache, "rightsize", "allpairs")

	for _, tt := range []struct {
		name, output, checkpoint string
	}{
		{"standard output", "", filepath.Join(cache, "*.matrix")},
		{"-o", "out.txt", "out.txt.matrix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"-c", "2", fn, a, a}
			if tt.output != "" {
				args = append([]string{"-o", tt.output}, args...)
			}
			pattern := tt.checkpoint
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(dir, pattern)
			}
			cmd, wait := start(t, dir, args...)
			path := waitCells(t, pattern, 20)
			errs := interrupt(t, cmd, wait)
			kept, err := sparsematrix.Load(path)
			if !filepath.IsAbs(tt.checkpoint) {
				path = tt.checkpoint // as the messages name it
			}
			if err != nil || len(kept) < 20 || len(kept) >= 144 {
				t.Fatalf("%d cells kept (%v)", len(kept), err)
			}
			if !strings.Contains(errs, fmt.Sprintf("the %d finished cells are kept in %s: run the same command again to resume", len(kept), path)) {
				t.Errorf("stderr:\n%s", errs)
			}
			calls(t, log)

			code, out, errs := runBinary(t, dir, args...)
			if tt.output != "" {
				data, _ := os.ReadFile(filepath.Join(dir, tt.output))
				out = string(data)
			}
			if code != 0 || !slices.Equal(sorted(out), sorted(want)) {
				t.Fatalf("re-run: exit %d, %d lines; stderr:\n%s", code, len(sorted(out)), errs)
			}
			if !strings.Contains(errs, fmt.Sprintf("resuming: %d cells are already in %s", len(kept), path)) {
				t.Errorf("re-run said:\n%s", errs)
			}
			again := calls(t, log)
			if len(again) != 144-len(kept) {
				t.Errorf("the re-run made %d calls, want the %d cells not kept", len(again), 144-len(kept))
			}
			for _, c := range again {
				x, y := itemIndex(t, c)
				if _, ok := kept[sparsematrix.Key{X: x, Y: y}]; ok {
					t.Errorf("cell %s was kept and computed again", c)
				}
			}
			if left, _ := filepath.Glob(pattern); len(left) != 0 {
				t.Errorf("the checkpoint is left after a complete run: %v", left)
			}
		})
	}
}

// TestOutputLeftAsItWas is issue 10's item 12: a run that is refused or
// interrupted leaves the previous -o FILE as it was, and a run that
// finishes replaces it whole.
func TestOutputLeftAsItWas(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	a := dataDir(t, rng, 6)
	scripts := t.TempDir()
	fails := testutil.WriteScript(t, scripts, "fails", `case "$1" in *item02) exit 3;; esac; echo 1`)
	slow := testutil.WriteScript(t, scripts, "slow", `sleep 0.05; echo 1`)
	const previous = "the user's previous result\n"
	check := func(t *testing.T, dir string, files ...string) {
		t.Helper()
		if data, _ := os.ReadFile(filepath.Join(dir, "s.txt")); string(data) != previous {
			t.Errorf("s.txt holds %q, want the previous %q", data, previous)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, files) {
			t.Errorf("the directory holds %v, want %v", names, files)
		}
	}

	t.Run("refused, -T local", func(t *testing.T) {
		dir := t.TempDir()
		code, _, errs := runBinary(t, dir, "-T", "local", "--job-size", "3", "--retries", "0", "-o", "s.txt", fails, a, a)
		if code != 1 {
			t.Fatalf("exit %d; stderr:\n%s", code, errs)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "s.txt")); len(sorted(string(got))) != 30 {
			t.Fatalf("a run with failed cells wrote %d lines, want 30", len(sorted(string(got))))
		}
		os.WriteFile(filepath.Join(dir, "s.txt"), []byte(previous), 0o644)
		code, _, errs = runBinary(t, dir, "-T", "local", "-o", "s.txt", "builtin:bytediff", a, a)
		check(t, dir, "s.txt", "s.txt.matrix", "s.txt.matrix.plan")
		if code != 1 || !strings.Contains(errs, "s.txt.matrix holds cells of another function") {
			t.Errorf("exit %d; stderr:\n%s", code, errs)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "s.txt"), []byte(previous), 0o644)
		cmd, wait := start(t, dir, "-c", "2", "-o", "s.txt", slow, a, a)
		waitCells(t, filepath.Join(dir, "s.txt.matrix"), 4)
		if errs := interrupt(t, cmd, wait); !strings.Contains(errs, "s.txt was left as it was") {
			t.Errorf("stderr:\n%s", errs)
		}
		check(t, dir, "s.txt", "s.txt.matrix")

		code, _, errs := runBinary(t, dir, "-c", "2", "-o", "s.txt", slow, a, a)
		if got, _ := os.ReadFile(filepath.Join(dir, "s.txt")); code != 0 || len(sorted(string(got))) != 36 {
			t.Errorf("finished run: exit %d, %d lines; stderr:\n%s", code, len(sorted(string(got))), errs)
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		// /dev/null is written, not replaced, and no checkpoint goes
		// beside it.
		code, out, errs := runMain(t, "-o", os.DevNull, "builtin:bytediff", a, a)
		st, err := os.Stat(os.DevNull)
		if code != 0 || out != "" || err != nil || st.Mode().IsRegular() {
			t.Errorf("exit %d, stdout %q, stderr %q; %s is %v", code, out, errs, os.DevNull, st.Mode())
		}
		if _, err := os.Stat(os.DevNull + ".matrix"); err == nil {
			os.Remove(os.DevNull + ".matrix")
			t.Errorf("a checkpoint was written beside %s", os.DevNull)
		}
	})
}

// TestLinesEscaped is issue 10's item 17: a result of several lines and a
// name holding a tab are escaped as wavefront export escapes TSV, on this
// machine and with -T.
func TestLinesEscaped(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tab\tname", `back\slash`} {
		os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644)
	}
	fn := testutil.WriteScript(t, t.TempDir(), "f", `printf 'first\tline\r\nsecond\\line\n'`)
	value := `first\tline\r\nsecond\\line`
	var want []string
	for _, a := range []string{`back\\slash`, `tab\tname`} {
		for _, b := range []string{`back\\slash`, `tab\tname`} {
			want = append(want, a+"\t"+b+"\t"+value)
		}
	}
	for _, mode := range [][]string{nil, {"-T", "local"}} {
		out := filepath.Join(t.TempDir(), "out.txt")
		code, _, errs := runBinary(t, t.TempDir(), append(mode, "-o", out, fn, dir, dir)...)
		got, _ := os.ReadFile(out)
		if code != 0 || !slices.Equal(sorted(string(got)), want) {
			t.Errorf("%v: exit %d, lines\n%q\nwant\n%q\nstderr: %s", mode, code, sorted(string(got)), want, errs)
		}
	}
}

// TestChangedItemRecomputed is issue 10's item 9: after an item's content
// changes, a re-run on the checkpoint recomputes its row and column (on
// this machine exactly those cells; with -T the blocks that hold them),
// says so, and writes the result of the new content; another function is
// refused.
func TestChangedItemRecomputed(t *testing.T) {
	for _, mode := range [][]string{nil, {"-T", "local", "--job-size", "2"}} {
		distributed := mode != nil
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(25, 26))
			a := dataDir(t, rng, 6)
			item := filepath.Join(a, "item03")
			os.WriteFile(item, []byte("ACGTACGTAC"), 0o644)
			log := filepath.Join(t.TempDir(), "calls")
			fn := loggingFunc(t, log, "0")
			dir := t.TempDir()
			args := append(append([]string{}, mode...), "--matrix", "ck.matrix", "-o", "s.txt", fn, a, a)
			if code, _, errs := runBinary(t, dir, args...); code != 0 {
				t.Fatalf("exit %d\n%s", code, errs)
			}
			calls(t, log)
			os.WriteFile(item, []byte("TTTTACGTAC"), 0o644) // the same size: only the mtime tells

			code, _, errs := runBinary(t, dir, args...)
			if code != 0 || !strings.Contains(errs, item+" changed since the checkpoint (modified ") ||
				!strings.Contains(errs, "its row and column will be computed again") {
				t.Fatalf("re-run: exit %d\n%s", code, errs)
			}
			again := calls(t, log)
			computed := map[[2]int]bool{}
			for _, c := range again {
				x, y := itemIndex(t, c)
				computed[[2]int{x, y}] = true
				if x != 3 && y != 3 && !(distributed && (x/2 == 1 || y/2 == 1)) {
					t.Errorf("the re-run computed %s, which does not read item03", c)
				}
			}
			for i := range 6 {
				if !computed[[2]int{3, i}] || !computed[[2]int{i, 3}] {
					t.Errorf("the re-run did not compute item03's cells with item%02d", i)
				}
			}
			if !distributed && len(again) != 11 {
				t.Errorf("the re-run made %d calls, want the 11 of item03's row and column", len(again))
			}
			_, want, _ := runBinary(t, t.TempDir(), fn, a, a)
			got, _ := os.ReadFile(filepath.Join(dir, "s.txt"))
			if !slices.Equal(sorted(string(got)), sorted(want)) {
				t.Errorf("after the change:\n%s\nwant\n%s", got, want)
			}

			other := testutil.WriteScript(t, t.TempDir(), "g", `echo 0`)
			code, _, errs = runBinary(t, dir, append(append([]string{}, mode...), "--matrix", "ck.matrix", "-o", "s.txt", other, a, a)...)
			if code != 1 || !strings.Contains(errs, "ck.matrix holds cells of another function: they were computed by "+fn+", not "+other) {
				t.Errorf("another function: exit %d\n%s", code, errs)
			}
			if after, _ := os.ReadFile(filepath.Join(dir, "s.txt")); !bytes.Equal(after, got) {
				t.Errorf("a refused run changed s.txt")
			}
		})
	}
}

// TestDamagedCheckpoint is issue 10's item 11 for allpairs: a value changed
// in the checkpoint is refused, with the command that cuts the file back
// to its intact records; after that command, the run completes with the
// right result.
func TestDamagedCheckpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	a := dataDir(t, rng, 5)
	dir := t.TempDir()
	args := []string{"--matrix", "ck.matrix", "-o", "s.txt", "builtin:bytediff", a, a}
	if code, _, errs := runBinary(t, dir, args...); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "s.txt"))
	ck := filepath.Join(dir, "ck.matrix")
	data, _ := os.ReadFile(ck)
	// The value of the 10th record: lines 1 and 2 are the file header,
	// then two lines a record.
	lines := bytes.SplitAfter(data, []byte("\n"))
	off := len(bytes.Join(lines[:2+2*9+1], nil))
	data[off] ^= 1 // a digit stays a digit
	os.WriteFile(ck, data, 0o644)

	code, _, errs := runBinary(t, dir, args...)
	repair := regexp.MustCompile(`the 9 records before it are intact: '(truncate -s (\d+) ck.matrix)' keeps them`).FindStringSubmatch(errs)
	if code != 1 || !strings.Contains(errs, "ck.matrix:21: corrupt record at byte ") || repair == nil {
		t.Fatalf("a damaged checkpoint: exit %d\n%s", code, errs)
	}
	truncate := exec.Command("sh", "-c", repair[1])
	truncate.Dir = dir
	if out, err := truncate.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", repair[1], err, out)
	}
	code, _, errs = runBinary(t, dir, args...)
	got, _ := os.ReadFile(filepath.Join(dir, "s.txt"))
	if code != 0 || !strings.Contains(errs, "resuming: 9 cells") || !slices.Equal(sorted(string(got)), sorted(string(want))) {
		t.Errorf("after %s: exit %d, stderr:\n%s\n%s\nwant\n%s", repair[1], code, errs, got, want)
	}
}
