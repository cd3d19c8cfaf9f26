package distmaster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/wavefront"
	"github.com/rightsize/rightsize/workqueue"
)

// binDir holds the real allpairs, wavefront and workqueue commands: the
// programs the jobs run, and the workers.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		binDir = dir
	}, "allpairs", "wavefront", "workqueue"))
}

func program(name string) string { return filepath.Join(binDir, name) }

// testConfig is the configuration of a test run on driver d.
func testConfig(t *testing.T, d batch.Driver, prog string) Config {
	return Config{
		Driver:       d,
		Program:      program(prog),
		WorkDir:      filepath.Join(t.TempDir(), "jobs"),
		TickInterval: 50 * time.Millisecond,
		Explain:      t.Output(), // what the master explains goes to the test log
	}
}

// localDriver opens the local-process driver, closed at the test's end.
func localDriver(t *testing.T) batch.Driver {
	d := batch.NewLocal(batch.Options{KillDelay: 200 * time.Millisecond})
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// wqDriver opens a Work Queue driver on a free port with fast abort fa
// for category, closed at the test's end.
func wqDriver(t *testing.T, category string, fa FastAbort) *wq.Driver {
	d, err := OpenDriver("wq", batch.Options{}, workqueue.Config{Addr: "127.0.0.1:0"}, category, fa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d.(*wq.Driver)
}

// workers are real `workqueue worker` processes.
type workers struct {
	t     *testing.T
	root  string
	procs []*exec.Cmd
}

// startWorkers starts n one-core workers for the master on port.
func startWorkers(t *testing.T, port, n int) *workers {
	root, err := os.MkdirTemp("", "distmaster-workers-")
	if err != nil {
		t.Fatal(err)
	}
	w := &workers{t: t, root: root}
	for i := 0; i < n; i++ {
		dir := filepath.Join(root, strconv.Itoa(i))
		os.Mkdir(dir, 0o755)
		cmd := exec.Command(program("workqueue"), "worker", "--cores", "1", "-s", dir, "-t", "120", "-i", "0.05", "-q",
			"127.0.0.1", strconv.Itoa(port))
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.procs = append(w.procs, cmd)
	}
	t.Cleanup(w.stop)
	return w
}

// kill kills worker i with SIGKILL, as a node that dies would.
func (w *workers) kill(i int) {
	w.procs[i].Process.Signal(syscall.SIGKILL)
	w.procs[i].Wait()
}

// stop ends the workers, then whatever their tasks left running (a worker
// killed with SIGKILL cannot stop its tasks), and removes their files.
func (w *workers) stop() {
	for _, cmd := range w.procs {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range w.procs {
		cmd.Wait()
	}
	killUnder(w.root)
	os.RemoveAll(w.root)
}

// killUnder kills every process whose working directory is under dir.
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, dir+"/") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// pairScript writes an All-Pairs program: the checksum of its two inputs,
// after body runs (with $1 and $2 set).
func pairScript(t *testing.T, dir, body string) string {
	return testutil.WriteScript(t, dir, "pair.sh", body+"\n"+`cat "$1" "$2" | cksum | cut -d' ' -f1`)
}

// itemSet writes n items with awkward names into a new directory.
func itemSet(t *testing.T, n int) *allpairs.Set {
	dir := filepath.Join(t.TempDir(), "items")
	os.Mkdir(dir, 0o755)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("item %02d's.dat", i)
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{byte('a' + i)}, 10+i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := allpairs.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func openPair(t *testing.T, spec string) funcs.Pair {
	fn, err := funcs.NewRegistry().OpenPair(spec, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	return fn
}

// multicoreLines runs the problem on this machine's cores, the reference
// every distributed result must equal.
func multicoreLines(t *testing.T, a, b *allpairs.Set, fn funcs.Pair, symmetric bool) []string {
	var out bytes.Buffer
	_, err := allpairs.Run(context.Background(), &allpairs.Problem{A: a, B: b, Func: fn, Symmetric: symmetric, OnFailure: func(*allpairs.CellError) {}}, &out)
	if _, failed := err.(*allpairs.FailedError); err != nil && !failed {
		t.Fatal(err)
	}
	return sortedLines(out.String())
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines
}

// cellLog reads the log a function script appends "$1<TAB>$2" to for
// every call, as a count per call.
func cellLog(t *testing.T, path string) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			calls[l]++
		}
	}
	return calls
}

// Wavefront problems for the tests: R.i.0 = i, R.0.j = j in an R directory.
type wfProblem struct {
	n      int
	dir    *wavefront.Dir
	matrix string
	here   int // Wavefront.HereCores
	// cellTime is Wavefront.CellTime: the function's time per cell as
	// if measured, for the models that size the blocks.
	cellTime *place.Value
}

func newWavefront(t *testing.T, n int) *wfProblem {
	dir := t.TempDir()
	for i := 0; i <= n; i++ {
		os.WriteFile(filepath.Join(dir, wavefront.CellFile(i, 0)), []byte(strconv.Itoa(i)), 0o644)
		os.WriteFile(filepath.Join(dir, wavefront.CellFile(0, i)), []byte(strconv.Itoa(i)), 0o644)
	}
	d, err := wavefront.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &wfProblem{n: n, dir: d, matrix: d.MatrixPath()}
}

func (p *wfProblem) region() wavefront.Rect { return wavefront.Rect{X: 1, Y: 1, W: p.n, H: p.n} }

// run runs the problem distributed on cfg, resuming from the checkpoint.
func (p *wfProblem) run(ctx context.Context, t *testing.T, cfg Config, fn funcs.Cell, jobSize int) (WavefrontResult, error) {
	w, out := p.wavefront(t, fn, jobSize)
	defer out.Close()
	return RunWavefront(ctx, cfg, w)
}

// wfOutcome is what a run started by start returned.
type wfOutcome struct {
	res WavefrontResult
	err error
}

// start starts run's run in a goroutine, for a test that acts while it
// runs, and returns where its outcome comes. The checkpoint is opened
// here: t.Fatal must be called from the test's goroutine.
func (p *wfProblem) start(ctx context.Context, t *testing.T, cfg Config, fn funcs.Cell, jobSize int) <-chan wfOutcome {
	w, out := p.wavefront(t, fn, jobSize)
	done := make(chan wfOutcome, 1)
	go func() {
		defer out.Close()
		res, err := RunWavefront(ctx, cfg, w)
		done <- wfOutcome{res, err}
	}()
	return done
}

// wavefront returns the problem's run of fn, resuming from the
// checkpoint, and the checkpoint it writes to (its Out), which the caller
// closes.
func (p *wfProblem) wavefront(t *testing.T, fn funcs.Cell, jobSize int) (*Wavefront, io.Closer) {
	t.Helper()
	done, err := sparsematrix.Load(p.matrix)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out, err := sparsematrix.Open(p.matrix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Wavefront{
		Func:   FunctionOf(fn.Info(), "", 0),
		Cell:   fn,
		Region: p.region(),
		Value: func(x, y int) (funcs.Input, error) {
			if v, ok := done[sparsematrix.Key{X: x, Y: y}]; ok {
				return funcs.Input{Data: v}, nil
			}
			if p.dir.HasFile(x, y) {
				return funcs.Input{Path: p.dir.CellPath(x, y)}, nil
			}
			return funcs.Input{}, fmt.Errorf("cell (%d,%d) is missing", x, y)
		},
		Done:       func(x, y int) bool { _, ok := done[sparsematrix.Key{X: x, Y: y}]; return ok },
		Out:        out,
		Checkpoint: p.matrix,
		JobSize:    jobSize,
		CellTime:   p.cellTime,
		HereCores:  p.here,
	}, out
}

// multicore computes the problem on this machine's cores.
func (p *wfProblem) multicore(t *testing.T, fn funcs.Cell) map[sparsematrix.Key][]byte {
	var mu sync.Mutex
	cells := cellMap{m: map[sparsematrix.Key][]byte{}, mu: &mu}
	_, err := multicore.RunWavefront(context.Background(), multicore.Wavefront{
		Cell: fn, Region: p.region(), Out: cells,
		Value: func(x, y int) (funcs.Input, error) { return funcs.Input{Path: p.dir.CellPath(x, y)}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return cells.m
}

type cellMap struct {
	m  map[sparsematrix.Key][]byte
	mu *sync.Mutex
}

func (c cellMap) Append(x, y int, v []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[sparsematrix.Key{X: x, Y: y}] = slices.Clone(v)
	return nil
}

func (p *wfProblem) result(t *testing.T) map[sparsematrix.Key][]byte {
	m, err := sparsematrix.Load(p.matrix)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equalCells(a, b map[sparsematrix.Key][]byte) bool { return maps.EqualFunc(a, b, bytes.Equal) }
