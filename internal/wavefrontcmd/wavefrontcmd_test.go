package wavefrontcmd_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/internal/wavefrontcmd"
	"github.com/rightsize/rightsize/sparsematrix"
)

var binDir string // holds the real wavefront binary

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		binDir = dir
	}, "wavefront", "workqueue"))
}

// runWF runs the command in-process.
func runWF(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = wavefrontcmd.Main(context.Background(), args, cmdutil.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// makeRdir writes the boundary R.i.0 = i, R.0.j = j (the sum oracle's) for
// an nx×ny problem, with a trailing newline as echo writes it.
func makeRdir(t *testing.T, nx, ny int) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i <= nx; i++ {
		writeCell(t, dir, i, 0, strconv.Itoa(i)+"\n")
	}
	for j := 1; j <= ny; j++ {
		writeCell(t, dir, 0, j, strconv.Itoa(j)+"\n")
	}
	return dir
}

func writeCell(t *testing.T, dir string, x, y int, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("R.%d.%d", x, y)), []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, path string) map[sparsematrix.Key][]byte {
	t.Helper()
	m, err := sparsematrix.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func cell(m map[sparsematrix.Key][]byte, x, y int) string {
	return string(m[sparsematrix.Key{X: x, Y: y}])
}

func TestOracleWithEveryFunctionKind(t *testing.T) {
	script := testutil.WriteScript(t, t.TempDir(), "sum", `echo $(( $(cat "$1") + $(cat "$2") + $(cat "$3") ))`)
	lib := testutil.BuildSharedLib(t, "../../funcs/testdata/sum.c")
	for _, fn := range []string{"builtin:sum", script, lib} {
		t.Run(filepath.Base(fn), func(t *testing.T) {
			dir := makeRdir(t, 9, 9)
			code, stdout, stderr := runWF(t, "-c", "2", fn, dir)
			if code != 0 || stdout != "R[9,9] = 1854882\n" || !strings.Contains(stderr, "computed 81 cells") {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
			}
			m := load(t, filepath.Join(dir, "R.matrix"))
			if len(m) != 81 || cell(m, 9, 9) != "1854882" || cell(m, 1, 1) != "2" {
				t.Errorf("R.matrix holds %d cells, R[9,9] = %s", len(m), cell(m, 9, 9))
			}
		})
	}
}

// TestSubproblemsEqualWholeRun computes a problem block by block, each block
// in a directory of its own holding only the cells it reads — shipped as
// R.matrix records or as R.x.y files, as a distributed master would — and
// checks the union of the blocks' -o outputs against one whole run.
func TestSubproblemsEqualWholeRun(t *testing.T) {
	const nx, ny, bw, bh = 12, 10, 5, 4
	whole := makeRdir(t, nx, ny)
	if code, _, stderr := runWF(t, "builtin:sum", whole); code != 0 {
		t.Fatalf("whole run: exit %d\n%s", code, stderr)
	}
	want := load(t, filepath.Join(whole, "R.matrix"))
	for k := 0; k <= nx; k++ {
		want[sparsematrix.Key{X: k}] = []byte(strconv.Itoa(k))
		want[sparsematrix.Key{Y: k}] = []byte(strconv.Itoa(k))
	}

	got := map[sparsematrix.Key][]byte{}
	maps.Copy(got, want) // the boundary only, below
	maps.DeleteFunc(got, func(k sparsematrix.Key, _ []byte) bool { return k.X > 0 && k.Y > 0 })
	block := 0
	for y0 := 1; y0 <= ny; y0 += bh {
		for x0 := 1; x0 <= nx; x0 += bw {
			w, h := min(bw, nx-x0+1), min(bh, ny-y0+1)
			dir := t.TempDir()
			var shipped bytes.Buffer
			sw := sparsematrix.NewWriter(&shipped)
			ship := func(x, y int) {
				v, ok := got[sparsematrix.Key{X: x, Y: y}]
				if !ok {
					t.Fatalf("block (%d,%d): input (%d,%d) not computed yet", x0, y0, x, y)
				}
				if block%2 == 0 {
					sw.Append(x, y, v)
				} else {
					writeCell(t, dir, x, y, string(v))
				}
			}
			for y := y0 - 1; y < y0+h; y++ {
				ship(x0-1, y)
			}
			for x := x0; x < x0+w; x++ {
				ship(x, y0-1)
			}
			if shipped.Len() > 0 {
				os.WriteFile(filepath.Join(dir, "R.matrix"), shipped.Bytes(), 0o644)
			}
			out := filepath.Join(t.TempDir(), "out.matrix")
			code, _, stderr := runWF(t, "-M", "-X", strconv.Itoa(x0), "-Y", strconv.Itoa(y0), "-W", strconv.Itoa(w), "-H", strconv.Itoa(h), "-o", out, "builtin:sum", dir)
			if code != 0 {
				t.Fatalf("block (%d,%d): exit %d\n%s", x0, y0, code, stderr)
			}
			cells := load(t, out)
			if len(cells) != w*h {
				t.Fatalf("block (%d,%d) %d×%d wrote %d cells", x0, y0, w, h, len(cells))
			}
			for k, v := range cells {
				if k.X < x0 || k.X >= x0+w || k.Y < y0 || k.Y >= y0+h {
					t.Fatalf("block (%d,%d) wrote cell %v outside itself", x0, y0, k)
				}
				got[k] = v
			}
			block++
		}
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Errorf("R[%d,%d]: blocks give %q, the whole run %q", k.X, k.Y, got[k], v)
		}
	}
}

func TestBadInput(t *testing.T) {
	ragged := makeRdir(t, 5, 5)
	os.Remove(filepath.Join(ragged, "R.3.0"))
	noCorner := makeRdir(t, 3, 3)
	os.Remove(filepath.Join(noCorner, "R.0.0"))
	corrupt := makeRdir(t, 3, 3)
	os.WriteFile(filepath.Join(corrupt, "R.matrix"), []byte("1 1 1\n3\ngarbage\n1 2 1\n4\n"), 0o644)
	notExec := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	good := makeRdir(t, 4, 4)

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"ragged boundary", []string{"builtin:sum", ragged}, 1, "ragged boundary: R.3.0 is missing, but R.5.0 exists"},
		{"no corner", []string{"builtin:sum", noCorner}, 1, "no R.0.0"},
		{"empty directory", []string{"builtin:sum", t.TempDir()}, 1, "no boundary"},
		{"missing directory", []string{"builtin:sum", "/no/such/dir"}, 1, "no such file or directory"},
		{"size beyond the boundary", []string{"-n", "7", "builtin:sum", good}, 1, "too short for 7×7: R.5.0 is missing"},
		{"sub-problem without its inputs", []string{"-X", "3", "-Y", "3", "-W", "2", "-H", "2", "builtin:sum", good}, 1, "x 3…4, y 3…4 reads cells that are neither in the checkpoint nor files"},
		{"sub-problem outside", []string{"-X", "9", "builtin:sum", good}, 1, "-X 9 -Y 1 is outside the 4×4 problem"},
		{"corrupt checkpoint", []string{"builtin:sum", corrupt}, 1, "R.matrix:3: corrupt record at byte 8"},
		{"unknown built-in", []string{"builtin:nope", good}, 1, "unknown built-in function (Wavefront built-ins: rdgame, sum, swcell)"},
		{"not executable", []string{notExec, good}, 1, "is not executable"},
		{"missing program", []string{"./no-such-prog", good}, 1, "no such file"},
		{"one argument", []string{"builtin:sum"}, 2, "expected 2 arguments (wavefront [flags] FUNC Rdir), got 1: builtin:sum"},
		{"zero block", []string{"-b", "0", "builtin:sum", good}, 2, "-b 0"},
		{"origin in the boundary", []string{"-X", "0", "builtin:sum", good}, 2, "cells start at (1,1)"},
		{"bad flag", []string{"--nope", "builtin:sum", good}, 2, "unknown flag: --nope"},
		{"arguments swapped", []string{good, "builtin:sum"}, 2, "builtin:sum is a function: wavefront takes FUNC Rdir, in that order"},
		{"directory as function", []string{good, good}, 2, good + " is a directory, not a function: wavefront takes FUNC Rdir"},
		{"-o in a missing directory", []string{"-o", "/no/such/dir/R.matrix", "builtin:sum", good}, 2, "-o /no/such/dir/R.matrix: directory /no/such/dir does not exist"},
		{"--bitmap a directory", []string{"--bitmap", good, "builtin:sum", good}, 2, "--bitmap " + good + ": is a directory; name a file"},
		{"extra arguments for a built-in", []string{"-e", "-x", "builtin:sum", good}, 2, "--extra-args applies only to program functions; builtin:sum is a Go function"},
		{"export -o in a missing directory", []string{"export", "-o", "/no/such/dir/R.tsv", good}, 2, "-o /no/such/dir/R.tsv: directory /no/such/dir does not exist"},
		{"-o a boundary file", []string{"-o", filepath.Join(good, "R.1.0"), "builtin:sum", good}, 2, "-o " + filepath.Join(good, "R.1.0") + " is the cell file R.1.0 of " + good + ": the results would overwrite it"},
		{"--bitmap the function", []string{"--bitmap", notExec, notExec, good}, 2, "--bitmap " + notExec + " is the function: the results would overwrite it"},
		{"bad export format", []string{"export", "-f", "xml", good}, 2, `--format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runWF(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, tt.code, tt.want)
			}
			// A run stopped on its inputs leaves no checkpoint it created:
			// export would take it for an empty result.
			if rdir := tt.args[len(tt.args)-1]; rdir != corrupt {
				if _, err := os.Stat(filepath.Join(rdir, "R.matrix")); err == nil {
					t.Errorf("%s/R.matrix was left behind", rdir)
				}
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(corrupt, "R.matrix")); !strings.Contains(string(data), "garbage") {
		t.Errorf("a corrupt checkpoint was changed: %q", data)
	}
}

// TestFailingFunction checks that a failure is reported with its cell and
// stderr, the run exits non-zero, the finished cells are kept, and a re-run
// with a fixed function is refused, unless --trust-checkpoint vouches for
// the cells, and then computes only what is missing.
func TestFailingFunction(t *testing.T) {
	dir := makeRdir(t, 6, 6)
	writeCell(t, dir, 4, 0, "poison\n")
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	failing := testutil.WriteScript(t, bin, "f", `echo call >> `+log+`
if grep -q poison "$2"; then echo "cannot digest $(cat "$2")" >&2; exit 3; fi
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	code, _, stderr := runWF(t, failing, dir)
	for _, want := range []string{"cell (4,1):", "exited with status 3", "cannot digest poison", "1 cell failed and 17 cells that depend on it were not run; the 18 finished cells are kept in"} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, want)
		}
	}
	m := load(t, filepath.Join(dir, "R.matrix"))
	if len(m) != 18 {
		t.Fatalf("%d cells kept, want the 18 with x < 4", len(m))
	}
	for k := range m {
		if k.X >= 4 {
			t.Errorf("cell %v depends on the failure but was written", k)
		}
	}

	// Fixed: the poison is now treated as a value; only 18 cells are left.
	os.Remove(log)
	fixed := testutil.WriteScript(t, bin, "f", `echo call >> `+log+`
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	code, _, stderr = runWF(t, fixed, dir)
	if code != 1 || !strings.Contains(stderr, "holds cells of another function: "+fixed+" has changed since they were computed") ||
		!strings.Contains(stderr, "--trust-checkpoint") {
		t.Fatalf("re-run with another function: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runWF(t, "--trust-checkpoint", fixed, dir)
	if code != 0 || !strings.Contains(stderr, "resuming: 18 of 36 cells") || !strings.Contains(stderr, "computed 18 cells (18 were already done)") {
		t.Fatalf("re-run: exit %d\n%s", code, stderr)
	}
	if calls, _ := os.ReadFile(log); strings.Count(string(calls), "call") != 18 {
		t.Errorf("re-run called the function %d times, want 18", strings.Count(string(calls), "call"))
	}
}

func TestFilesBitmapAndStdout(t *testing.T) {
	dir := makeRdir(t, 5, 4)
	pic := filepath.Join(t.TempDir(), "progress.png")
	code, _, stderr := runWF(t, "--files", "--bitmap", pic, "--bitmap-interval", "10ms", "builtin:sum", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	m := load(t, filepath.Join(dir, "R.matrix"))
	for k, v := range m {
		if data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("R.%d.%d", k.X, k.Y))); err != nil || !bytes.Equal(data, v) {
			t.Errorf("R.%d.%d = %q, %v; the matrix says %q", k.X, k.Y, data, err, v)
		}
	}
	f, err := os.Open(pic)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Finished: every pixel is blue.
	if r, g, b, _ := img.At(0, 0).RGBA(); r>>8 != 0x20 || g>>8 != 0x40 || b>>8 != 0xd0 {
		t.Errorf("finished picture pixel = %x %x %x, want blue", r>>8, g>>8, b>>8)
	}

	// --files after a run without it writes the files of the loaded cells.
	dir2 := makeRdir(t, 3, 3)
	runWF(t, "builtin:sum", dir2)
	if code, _, stderr := runWF(t, "--files", "builtin:sum", dir2); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	m2 := load(t, filepath.Join(dir2, "R.matrix"))
	for k, v := range m2 {
		if data, err := os.ReadFile(filepath.Join(dir2, fmt.Sprintf("R.%d.%d", k.X, k.Y))); err != nil || !bytes.Equal(data, v) {
			t.Errorf("R.%d.%d = %q, %v; want %q", k.X, k.Y, data, err, v)
		}
	}

	// -o - prints the records and leaves the directory alone.
	dir3 := makeRdir(t, 9, 9)
	code, stdout, stderr := runWF(t, "-o", "-", "builtin:sum", dir3)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	r := sparsematrix.NewReader(strings.NewReader(stdout), "stdout")
	n, last := 0, ""
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if rec.X == 9 && rec.Y == 9 {
			last = string(rec.Value)
		}
	}
	if n != 81 || last != "1854882" {
		t.Errorf("stdout held %d records, R[9,9] = %q", n, last)
	}
	if _, err := os.Stat(filepath.Join(dir3, "R.matrix")); !os.IsNotExist(err) {
		t.Errorf("-o - created R.matrix: %v", err)
	}
}

func TestExport(t *testing.T) {
	dir := makeRdir(t, 2, 1)
	os.WriteFile(filepath.Join(dir, "R.matrix"), []byte("1 1 3\na\tb\n2 1 2\nc\n\n"), 0o644)
	tests := []struct {
		format, want string
	}{
		{"tsv", "0\t0\t0\n0\t1\t1\n1\t0\t1\n1\t1\ta\\tb\n2\t0\t2\n2\t1\tc\\n\n"},
		{"csv", "x,y,value\n0,0,0\n0,1,1\n1,0,1\n1,1,a\tb\n2,0,2\n2,1,\"c\n\"\n"},
		{"grid", "y\\x,0,1,2\n0,0,1,2\n1,1,a\tb,\"c\n\"\n"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runWF(t, "export", "--format", tt.format, dir)
		if code != 0 || stdout != tt.want {
			t.Errorf("export %s: exit %d, stderr %s\ngot  %q\nwant %q", tt.format, code, stderr, stdout, tt.want)
		}
	}
	// A single sparse-matrix file, to a file.
	out := filepath.Join(t.TempDir(), "out.tsv")
	if code, _, stderr := runWF(t, "export", "-o", out, filepath.Join(dir, "R.matrix")); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if data, _ := os.ReadFile(out); string(data) != "1\t1\ta\\tb\n2\t1\tc\\n\n" {
		t.Errorf("export of a file = %q", data)
	}
}

func TestTornCheckpoint(t *testing.T) {
	clean := makeRdir(t, 8, 8)
	runWF(t, "builtin:sum", clean)
	want := load(t, filepath.Join(clean, "R.matrix"))

	dir := makeRdir(t, 8, 8)
	runWF(t, "builtin:sum", dir)
	path := filepath.Join(dir, "R.matrix")
	data, _ := os.ReadFile(path)
	cut := len(data) / 2
	for data[cut-1] == '\n' { // make sure the cut falls inside a record
		cut++
	}
	os.WriteFile(path, data[:cut], 0o644)
	code, stdout, stderr := runWF(t, "builtin:sum", dir)
	if code != 0 || !strings.Contains(stderr, "ignored a torn last record") || !strings.Contains(stdout, "R[8,8] = "+string(want[sparsematrix.Key{X: 8, Y: 8}])) {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if got := load(t, path); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("after the torn checkpoint: %d cells, want %d, or values differ", len(got), len(want))
	}
}

// TestKillAndResume kills the real binary with SIGKILL in the middle of a
// run, re-runs it, and checks that nothing finished is computed again and
// that the result is exactly that of a run that was never killed.
func TestKillAndResume(t *testing.T) {
	const n = 14
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	fn := testutil.WriteScript(t, bin, "f", `echo call >> `+log+`
sleep 0.02
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	binary := filepath.Join(binDir, "wavefront")

	clean := makeRdir(t, n, n)
	if out, err := exec.Command(binary, fn, clean).CombinedOutput(); err != nil {
		t.Fatalf("clean run: %v\n%s", err, out)
	}
	want := load(t, filepath.Join(clean, "R.matrix"))

	dir := makeRdir(t, n, n)
	matrix := filepath.Join(dir, "R.matrix")
	cmd := exec.Command(binary, "-c", "2", fn, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, err := sparsematrix.Load(matrix); err == nil && len(m) >= n*n/3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run wrote too few cells in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the run was not killed: %v", err)
	}
	kept := load(t, matrix)
	if len(kept) >= n*n {
		t.Fatalf("the run finished (%d cells) before it was killed", len(kept))
	}
	time.Sleep(100 * time.Millisecond) // let orphaned calls of the killed run finish logging
	os.Remove(log)

	out, err := exec.Command(binary, fn, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
	checkResumed(t, out, fmt.Sprintf("resuming: %d of %d cells", len(kept), n*n), log, len(kept), matrix, want)
}

// checkResumed checks the output of a re-run after a kill: it said
// wantSaid, called the function (which appends a "call" line to log) only
// for the cells not kept, and left the result want in matrix.
func checkResumed(t *testing.T, out []byte, wantSaid, log string, kept int, matrix string, want map[sparsematrix.Key][]byte) {
	t.Helper()
	if !strings.Contains(string(out), wantSaid) {
		t.Errorf("re-run said:\n%s\nwant %q", out, wantSaid)
	}
	calls, _ := os.ReadFile(log)
	if got := strings.Count(string(calls), "call"); got != len(want)-kept {
		t.Errorf("re-run called the function %d times, want %d (%d cells were kept)", got, len(want)-kept, kept)
	}
	if got := load(t, matrix); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("after kill and re-run: %d cells, want %d, or values differ", len(got), len(want))
	}
}

// TestAlignmentBuiltin runs swcell through the command on two sequences cut
// into chunks and checks the score against the whole-sequence SWAlign.
func TestAlignmentBuiltin(t *testing.T) {
	a := strings.Repeat("ACGTTGCAAT", 30) + "GATTACA"
	b := "CC" + strings.ReplaceAll(a[40:], "TTG", "TAG") + "GGGA"
	dir := t.TempDir()
	writeCell(t, dir, 0, 0, "")
	for i := 0; i*50 < len(a); i++ {
		writeCell(t, dir, i+1, 0, a[i*50:min(len(a), i*50+50)]+"\n")
	}
	for j := 0; j*40 < len(b); j++ {
		writeCell(t, dir, 0, j+1, b[j*40:min(len(b), j*40+40)]+"\n")
	}
	code, stdout, stderr := runWF(t, "builtin:swcell", dir)
	want, _ := funcs.SWAlign([]byte(a), []byte(b))
	if code != 0 || !strings.Contains(stdout, "= swcell best "+string(want)+" …") {
		t.Fatalf("exit %d, want best %s:\n%s%s", code, want, stdout, stderr)
	}
}

func TestBadFunctionCreatesNothing(t *testing.T) {
	dir := makeRdir(t, 2, 2)
	if code, _, _ := runWF(t, "./no-such-prog", dir); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "R.matrix")); !os.IsNotExist(err) {
		t.Errorf("a failed start created R.matrix: %v", err)
	}
}
