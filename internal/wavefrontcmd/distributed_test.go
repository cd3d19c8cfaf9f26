package wavefrontcmd_test

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
)

func TestDistributedFlagErrors(t *testing.T) {
	dir := makeRdir(t, 3, 3)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-T", "pbs"}, "unknown batch type"},
		{[]string{"-N", "proj"}, "give -T TYPE too"},
		{[]string{"--job-size", "4"}, "give -T TYPE too"},
		{[]string{"-T", "local", "-M"}, "give one of them"},
		{[]string{"-T", "local", "-b", "4"}, "one core of its worker"},
		{[]string{"-T", "local", "-o", "-"}, "name a file"},
		{[]string{"-T", "local", "--job-size", "-2"}, "at least one cell"},
		{[]string{"-T", "sge", "-Z", "port"}, "-T wq only"},
	}
	for _, tt := range tests {
		code, out, errs := runWF(t, append(append([]string{}, tt.args...), "builtin:sum", dir)...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 with %q", tt.args, code, out, errs, tt.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 7 {
		t.Errorf("bad flags left files in Rdir: %v", entries)
	}
}

// wavefront runs the real binary in dir.
func wavefront(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "wavefront"), args...)
	t.Cleanup(func() { cmd.Process.Kill() }) // if the test failed before waiting
	return cmd
}

func TestDistributedEqualsMulticore(t *testing.T) {
	const n = 11
	clean := makeRdir(t, n, n)
	if out, err := wavefront(t, "builtin:sum", clean).CombinedOutput(); err != nil {
		t.Fatalf("multicore run: %v\n%s", err, out)
	}
	want := load(t, filepath.Join(clean, "R.matrix"))

	dir := makeRdir(t, n, n)
	out, err := wavefront(t, "-T", "local", "-v", "--job-size", "4", "--files", "--bitmap", filepath.Join(dir, "p.png"), "builtin:sum", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("-T local: %v\n%s", err, out)
	}
	if got := load(t, filepath.Join(dir, "R.matrix")); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("-T local: %d cells, want %d, or values differ", len(got), len(want))
	}
	for _, want := range []string{"R[11,11] = " + cell(want, n, n), "blocks of 4×4: 9 jobs", "computed 121 cells"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "R.7.5")); err != nil || string(b) != cell(want, 7, 5) {
		t.Errorf("--files: R.7.5 = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p.png")); err != nil {
		t.Errorf("--bitmap: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".R.matrix.jobs")); !os.IsNotExist(err) {
		t.Errorf("the work directory was left behind: %v", err)
	}
}

// freePort returns a TCP port that was free a moment ago, so that a master
// and the master that replaces it listen on the same one.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestDistributedKillAndResume kills the real master of a -T wq run with
// SIGKILL while two real workers run its blocks; the workers wait for the
// master to come back, and the re-run computes only the blocks that were
// not finished.
func TestDistributedKillAndResume(t *testing.T) {
	const n = 12
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	fn := testutil.WriteScript(t, bin, "f", `echo call >> `+log+`
sleep 0.03
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	clean := makeRdir(t, n, n)
	if out, err := wavefront(t, fn, clean).CombinedOutput(); err != nil {
		t.Fatalf("multicore run: %v\n%s", err, out)
	}
	want := load(t, filepath.Join(clean, "R.matrix"))
	os.Remove(log)

	port := freePort(t)
	root := t.TempDir()
	for i := 0; i < 2; i++ {
		w := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", "1", "-s", root, "-t", "60", "-i", "0.05", "-b", "0.2", "-q", "127.0.0.1", port)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Process.Signal(syscall.SIGTERM); w.Wait() })
	}

	dir := makeRdir(t, n, n)
	matrix := filepath.Join(dir, "R.matrix")
	master := wavefront(t, "-T", "wq", "-p", port, "--job-size", "3", fn, dir)
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m, err := sparsematrix.Load(matrix); err == nil && len(m) >= n*n/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run kept too few cells in 60s")
		}
	}
	master.Process.Signal(syscall.SIGKILL)
	master.Wait()
	kept := load(t, matrix)
	if len(kept) >= n*n || len(kept)%9 != 0 {
		t.Fatalf("%d cells kept when killed: want whole blocks, not all", len(kept))
	}
	time.Sleep(300 * time.Millisecond) // the workers stop the killed master's tasks
	os.Remove(log)

	out, err := wavefront(t, "-T", "wq", "-p", port, fn, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	}
	checkResumed(t, out, "resuming: "+strconv.Itoa(len(kept)), log, len(kept), matrix, want)
}

// TestDistributedFailure: a block whose function keeps failing is given up
// with what the function said; the blocks that depend on it are not run;
// everything else is kept; the exit status is 1.
func TestDistributedFailure(t *testing.T) {
	dir := makeRdir(t, 8, 8)
	// Only cell (1,7) has a left input of 7.
	fn := testutil.WriteScript(t, t.TempDir(), "f", `[ "$(cat "$1")" = 7 ] && { echo "seven on the left" >&2; exit 1; }
cat "$1" "$2" "$3" | cksum | cut -d' ' -f1`)
	out, err := wavefront(t, "-T", "local", "--retries", "0", "--job-size", "4", fn, dir).CombinedOutput()
	errs := string(out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("%v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"block x1-y5 failed after 1 attempt:", "seven on the left", "1 of 4 blocks failed",
		"16 cells that depend on it were not run", "the 40 finished cells are kept"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// TestHybridWorkerJoinsLate: `wavefront -T wq --hybrid` with no host
// listed starts with blocks cut for no worker; a real worker on 127.0.0.1
// that joins once the run has begun gets the blocks cut again for it (on
// this machine's two cores, larger than 1×1), the cells here give way to
// it by its core, and the run computes what multicore does.
func TestHybridWorkerJoinsLate(t *testing.T) {
	const n = 12
	bin := t.TempDir()
	fn := testutil.WriteScript(t, bin, "f", "sleep 0.05\ncat \"$1\" \"$2\" \"$3\" | cksum | cut -d' ' -f1")
	quick := testutil.WriteScript(t, bin, "g", "cat \"$1\" \"$2\" \"$3\" | cksum | cut -d' ' -f1") // the same values
	clean := makeRdir(t, n, n)
	if out, err := wavefront(t, quick, clean).CombinedOutput(); err != nil {
		t.Fatalf("multicore run: %v\n%s", err, out)
	}
	want := load(t, filepath.Join(clean, "R.matrix"))

	dir := makeRdir(t, n, n)
	portFile := filepath.Join(t.TempDir(), "port")
	var out bytes.Buffer
	master := wavefront(t, "-T", "wq", "-p", "0", "-Z", portFile, "--hybrid", "-v", fn, dir)
	master.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "RIGHTSIZE_CLUSTER=none")
	master.Stdout, master.Stderr = &out, &out
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	var port []byte
	testutil.WaitFor(t, "the master to listen", time.Minute, func() bool {
		port, _ = os.ReadFile(portFile)
		return len(port) > 0
	})
	w := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", "1", "-s", t.TempDir(), "-t", "60", "-i", "0.05", "-b", "0.2", "-q",
		"127.0.0.1", strings.TrimSpace(string(port)))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Signal(syscall.SIGTERM); w.Wait() })
	if err := master.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := load(t, filepath.Join(dir, "R.matrix")); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
	}
	text := out.String()
	var side int
	if i := strings.Index(text, "the first worker joined after "); i < 0 {
		t.Fatalf("the blocks were not cut again for the worker:\n%s", text)
	} else if _, err := fmt.Sscanf(text[i+strings.Index(text[i:], ": blocks of "):], ": blocks of %d×", &side); err != nil {
		t.Fatalf("the new block side is not said (%v):\n%s", err, text)
	}
	if !strings.Contains(text, fmt.Sprintf("blocks of %d×%d: ", side, side)) {
		t.Errorf("the summary is not of the new blocks of %d×%d:\n%s", side, side, text)
	}
	if runtime.NumCPU() == 2 && side < 2 {
		t.Errorf("blocks of %d×%d for a worker beside this machine's one core left to the cells; want larger:\n%s", side, side, text)
	}
	if !strings.Contains(text, fmt.Sprintf("the cells here take %d of", runtime.NumCPU()-1)) {
		t.Errorf("the cells here are not said to give way to the worker:\n%s", text)
	}
}
