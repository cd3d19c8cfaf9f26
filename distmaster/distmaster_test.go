package distmaster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/sparsematrix"
	"github.com/rightsize/rightsize/workqueue"
)

// backend is a batch system for a table of tests.
type backend struct {
	name string
	open func(t *testing.T, category string, fa FastAbort) batch.Driver
}

var backends = []backend{
	{"local", func(t *testing.T, _ string, _ FastAbort) batch.Driver { return localDriver(t) }},
	// Blocks done in the master's process (batch.Job.Do), as this
	// machine's share of a hybrid run.
	{inProcess, func(t *testing.T, _ string, _ FastAbort) batch.Driver {
		d := batch.NewLocal(batch.Options{InProcess: true})
		t.Cleanup(func() { d.Close(context.Background()) })
		return d
	}},
	{"wq", func(t *testing.T, category string, fa FastAbort) batch.Driver {
		d := wqDriver(t, category, fa)
		startWorkers(t, d.Master().Port(), 2)
		return d
	}},
}

const inProcess = "in process"

// runAllPairs runs p on cfg, with a new checkpoint, and returns the lines
// it wrote.
func runAllPairs(ctx context.Context, t *testing.T, cfg Config, p AllPairs) ([]string, AllPairsResult, error) {
	t.Helper()
	return runAllPairsAt(ctx, t, cfg, p, filepath.Join(t.TempDir(), "allpairs.matrix"))
}

// runAllPairsAt runs p on cfg with the checkpoint at path.
func runAllPairsAt(ctx context.Context, t *testing.T, cfg Config, p AllPairs, path string) ([]string, AllPairsResult, error) {
	t.Helper()
	ck, err := allpairs.OpenCheckpoint(path, allpairs.CheckpointOf{
		A: p.A, B: p.B, Symmetric: p.Symmetric, Func: funcs.Info{Name: p.Func.Spec, Path: p.Func.Path}, Args: p.Func.ExtraArgs,
	})
	if err != nil {
		return nil, AllPairsResult{}, err
	}
	defer ck.Close()
	var out bytes.Buffer
	p.Out = &out
	p.Checkpoint = ck
	res, err := RunAllPairs(ctx, cfg, &p)
	return sortedLines(out.String()), res, err
}

func TestAllPairsEqualsMulticore(t *testing.T) {
	set := itemSet(t, 11)
	other := itemSet(t, 7)
	script := openPair(t, pairScript(t, t.TempDir(), ""))
	builtin := openPair(t, "builtin:bytediff")
	tests := []struct {
		name       string
		fn         funcs.Pair
		b          *allpairs.Set
		symmetric  bool
		jobW, jobH int
	}{
		{"program 4x3", script, other, false, 4, 3},
		{"program symmetric 4", script, set, true, 4, 4},
		{"builtin whole", builtin, other, false, 100, 100},
		{"builtin symmetric 3", builtin, set, true, 3, 3},
		{"builtin 1x5", builtin, set, false, 1, 5},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			d := be.open(t, "allpairs", FastAbort{})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					want := multicoreLines(t, set, tt.b, tt.fn, tt.symmetric)
					cfg := testConfig(t, d, "allpairs")
					// The cells in flight: every block's once, on the
					// way up, and none at the end.
					var flight []int64
					cfg.InFlight = func(cells int64) { flight = append(flight, cells) }
					got, res, err := runAllPairs(context.Background(), t, cfg, AllPairs{
						A: set, B: tt.b, Func: FunctionOf(tt.fn.Info(), "", 0), Pair: tt.fn,
						Symmetric: tt.symmetric, JobW: tt.jobW, JobH: tt.jobH,
					})
					if err != nil {
						t.Fatal(err)
					}
					// Jobs done in process say nothing of what a job costs.
					if (be.name == inProcess) != (res.MeanJob == 0) {
						t.Errorf("on %s, the mean job time of the processes is %v", be.name, res.MeanJob)
					}
					checkMeanJobCells(t, be.name, res.MeanJobCells, res.Computed, res.Done)
					if !slices.Equal(got, want) {
						t.Errorf("%d lines, want %d; first differing:\n%s", len(got), len(want), firstDiff(got, want))
					}
					if res.Computed != int64(len(want)) || res.Cells != int64(len(want)) || res.Written != int64(len(want)) {
						t.Errorf("result %+v, want %d cells", res, len(want))
					}
					var sent, prev int64
					for _, n := range flight {
						if n < 0 || n > int64(len(want)) {
							t.Fatalf("cells in flight %v", flight)
						}
						sent += max(0, n-prev)
						prev = n
					}
					if sent != int64(len(want)) || prev != 0 {
						t.Errorf("cells in flight %v: %d sent, %d left at the end; want %d sent, none left", flight, sent, prev, len(want))
					}
				})
			}
		})
	}
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("got  %q\nwant %q", g, w)
		}
	}
	return ""
}

func TestWavefrontEqualsMulticore(t *testing.T) {
	script := testutil_writeCellScript(t, "")
	tests := []struct {
		name    string
		fn      string
		n, size int
	}{
		{"builtin 13 in 5", "builtin:sum", 13, 5},
		{"program 9 in 4", script, 9, 4},
		{"builtin 6 whole", "builtin:sum", 6, 6},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			d := be.open(t, "wavefront", FastAbort{})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					fn := openCell(t, tt.fn)
					p := newWavefront(t, tt.n)
					want := p.multicore(t, fn)
					cfg := testConfig(t, d, "wavefront")
					var ends []JobEnd
					cfg.JobEnded = func(e JobEnd) { ends = append(ends, e) }
					res, err := p.run(context.Background(), t, cfg, fn, tt.size)
					if err != nil {
						t.Fatal(err)
					}
					if len(ends) != res.Jobs {
						t.Errorf("%d jobs ended, %d ran", len(ends), res.Jobs)
					}
					for _, e := range ends {
						// Blocks of the first row read only the one left of them.
						nx := (tt.n + tt.size - 1) / tt.size
						wantParents := min(e.Block%nx, 1) + min(e.Block/nx, 1)
						if e.Err != nil || e.Here != (be.name == inProcess) || e.Ended.Before(e.Started) || len(e.Parents) != wantParents {
							t.Errorf("job ended: %+v", e)
						}
					}
					if (be.name == inProcess) != (res.MeanJob == 0) {
						t.Errorf("on %s, the mean job time of the processes is %v", be.name, res.MeanJob)
					}
					checkMeanJobCells(t, be.name, res.MeanJobCells, int64(res.Computed), res.Done)
					if got := p.result(t); !equalCells(got, want) {
						t.Errorf("%d cells, want %d, or values differ", len(got), len(want))
					}
					blocks := (tt.n + tt.size - 1) / tt.size
					if res.Computed != tt.n*tt.n || res.Jobs != blocks*blocks || res.Blocks != blocks*blocks {
						t.Errorf("result %+v", res)
					}
				})
			}
		})
	}
}

func openCell(t *testing.T, spec string) funcs.Cell {
	fn, err := funcs.NewRegistry().OpenCell(spec, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	return fn
}

// testutil_writeCellScript writes a Wavefront program: the checksum of its
// three inputs, after body runs.
func testutil_writeCellScript(t *testing.T, body string) string {
	path := filepath.Join(t.TempDir(), "cell.sh")
	script := "#!/bin/sh\n" + body + "\n" + `cat "$1" "$2" "$3" | cksum | cut -d' ' -f1` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFailingBlock: a function that fails on one item fails the blocks of
// its row every time; they are retried, then reported with the function's
// complaint, and every other cell — the failed blocks' good cells too — is
// kept and written.
func TestFailingBlock(t *testing.T) {
	set := itemSet(t, 9)
	good := openPair(t, pairScript(t, t.TempDir(), ""))
	want := multicoreLines(t, set, set, good, false)
	want = slices.DeleteFunc(want, func(l string) bool { return strings.HasPrefix(l, "item 03's.dat\t") })
	// "item?03": the space is "_" in the name a worker sees; a bare "03" could
	// match the test's random temporary directory.
	fn := openPair(t, pairScript(t, t.TempDir(), `case "$1" in *item?03*) echo "cannot compare $1" >&2; exit 3;; esac`))
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := testConfig(t, be.open(t, "allpairs", FastAbort{}), "allpairs")
			cfg.Retries = 1
			got, res, err := runAllPairs(context.Background(), t, cfg, AllPairs{
				A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 4, JobH: 4,
			})
			var fe *FailedError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FailedError", err)
			}
			if len(fe.Blocks) != 3 || fe.Total != 9 {
				t.Fatalf("%d of %d blocks failed, want 3 of 9: %v; its last job said:\n%s", len(fe.Blocks), fe.Total, err, fe.Blocks[0].StderrTail())
			}
			for _, b := range fe.Blocks {
				if b.Attempts != 2 || !strings.HasPrefix(b.Block, "x0-") || !strings.Contains(b.StderrTail(), "cannot compare") {
					t.Errorf("block %s: %d attempts, stderr %q", b.Block, b.Attempts, b.StderrTail())
				}
			}
			if res.Jobs != 12 || res.Retries != 3 || res.Failed != 3 || res.Done != 6 {
				t.Errorf("counts %+v", res.TrackerCounts)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%d lines, want %d: %s", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

// TestBatchSystemDown: when the batch system refuses every submission (its
// controller is down), the run stops after a few refusals with the batch
// system's own message, instead of waiting on it for every attempt of
// every block.
func TestBatchSystemDown(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	testutil.WriteScript(t, bin, "sbatch", `echo call >> `+calls+`
echo "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2
exit 1`)
	for _, name := range []string{"squeue", "scancel", "sacct"} {
		testutil.WriteScript(t, bin, name, "exit 0")
	}
	d, err := OpenDriver("slurm", batch.Options{Bin: bin, Spool: t.TempDir()}, workqueue.Config{}, "", FastAbort{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	cfg := testConfig(t, d, "allpairs")
	cfg.Kind = "slurm"
	set := itemSet(t, 6)
	_, _, err = runAllPairs(context.Background(), t, cfg, AllPairs{
		A: set, B: set, Func: FunctionOf(openPair(t, "builtin:bytediff").Info(), "", 0), JobW: 2, JobH: 2})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Fatalf("err = %v, want a *RefusedError with sbatch's message", err)
	}
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "call") != 3 {
		t.Errorf("sbatch was run %d times for 9 blocks, want 3 (jobs.Config.MaxRefused)", strings.Count(string(b), "call"))
	}
}

// TestMissingItemFailsItsBlocks: an item that disappears once the run has
// started fails the blocks that need it (Work Queue cannot send it), not
// the run as a batch system refusing jobs would: every other block is
// computed.
func TestMissingItemFailsItsBlocks(t *testing.T) {
	set := itemSet(t, 6)
	fn := openPair(t, "builtin:bytediff")
	missing := set.Items[0].Name
	// With blocks of 2×2, items 0 and 1 make the first row and column of
	// blocks: those need the missing item and cannot be sent at all.
	inFailedBlock := func(name string) bool { return name == missing || name == set.Items[1].Name }
	want := slices.DeleteFunc(multicoreLines(t, set, set, fn, false), func(l string) bool {
		a, rest, _ := strings.Cut(l, "\t")
		b, _, _ := strings.Cut(rest, "\t")
		return inFailedBlock(a) || inFailedBlock(b)
	})
	if err := os.Remove(set.Items[0].Path); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, backends[1].open(t, "allpairs", FastAbort{}), "allpairs")
	got, _, err := runAllPairs(context.Background(), t, cfg, AllPairs{
		A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 2, JobH: 2})
	var fe *FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *FailedError", err)
	}
	// The blocks of row 0 and of column 0 of the 3×3 blocks.
	if len(fe.Blocks) != 5 || !strings.Contains(err.Error(), missing) {
		t.Errorf("%d blocks failed, want 5, naming %q: %v", len(fe.Blocks), missing, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%d lines, want %d: %s", len(got), len(want), firstDiff(got, want))
	}
}

// TestTransientFailureRetried: a block that fails once succeeds when it is
// submitted again, and the run succeeds.
func TestTransientFailureRetried(t *testing.T) {
	set := itemSet(t, 6)
	mark := filepath.Join(t.TempDir(), "failed-once")
	fn := openPair(t, pairScript(t, t.TempDir(), `mkdir `+mark+` 2>/dev/null && { echo "transient trouble" >&2; exit 1; }`))
	want := multicoreLines(t, set, set, openPair(t, pairScript(t, t.TempDir(), "")), false)
	cfg := testConfig(t, localDriver(t), "allpairs")
	got, res, err := runAllPairs(context.Background(), t, cfg, AllPairs{A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 3, JobH: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Retries != 1 || res.Jobs != 5 {
		t.Errorf("counts %+v, want one retry", res.TrackerCounts)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s", firstDiff(got, want))
	}
}

// TestStraggler: a function that hangs (for an hour) once makes its block a
// straggler; the run still finishes, with every cell right and no retry.
// What rescues the block — the master's fast abort on the local driver;
// Work Queue's fast abort or a speculative copy on workers — and which
// other jobs the machine's noise makes stragglers of their own are
// decisions of the state machines, tested on logical time there
// (jobs.TestTrackerFastAbort, sched.TestStragglerDecision); this test waits only
// for the run to end, so that a loaded machine cannot fail it.
func TestStraggler(t *testing.T) {
	set := itemSet(t, 8)
	want := multicoreLines(t, set, set, openPair(t, pairScript(t, t.TempDir(), "")), false)
	fa := FastAbort{Multiplier: 3, MinSamples: 3}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			mark := filepath.Join(t.TempDir(), "hung")
			fn := openPair(t, pairScript(t, t.TempDir(), `mkdir `+mark+` 2>/dev/null && sleep 3600; sleep 0.05`))
			d := be.open(t, "allpairs", fa)
			cfg := testConfig(t, d, "allpairs")
			cfg.FastAbort = fa
			var warnings bytes.Buffer
			cfg.Logger = slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
			t.Cleanup(func() { killUnder(cfg.WorkDir) })
			got, res, err := runAllPairs(context.Background(), t, cfg, AllPairs{A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 2, JobH: 4})
			if err != nil {
				t.Fatal(err)
			}
			rescues := res.FastAborts
			if wqd, ok := d.(*wq.Driver); ok {
				st := wqd.Master().Stats()
				rescues = st.FastAborts + st.SpeculativeCopies
			} else if !strings.Contains(warnings.String(), "fast abort") {
				// The master's own fast abort is reported without -v.
				t.Errorf("no fast abort warning in the log:\n%s", warnings.String())
			}
			if rescues < 1 || res.Retries != 0 {
				t.Errorf("%d fast aborts or copies, %d retries; want at least 1 and 0", rescues, res.Retries)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s", firstDiff(got, want))
			}
		})
	}
}

// TestWorkerKilled kills one of two workers while it runs a block: Work
// Queue gives the block to the other, and the result is complete.
func TestWorkerKilled(t *testing.T) {
	set := itemSet(t, 6)
	want := multicoreLines(t, set, set, openPair(t, pairScript(t, t.TempDir(), "")), false)
	fn := openPair(t, pairScript(t, t.TempDir(), "sleep 0.2"))
	d := wqDriver(t, "allpairs", FastAbort{})
	w := startWorkers(t, d.Master().Port(), 2)
	killed := false
	got, res, err := runAllPairs(context.Background(), t, testConfig(t, d, "allpairs"), AllPairs{
		A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 2, JobH: 2,
		Progress: func(cells int64) {
			// After the first block, both workers are busy with the next.
			if cells >= 4 && !killed {
				killed = true
				w.kill(0)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !killed {
		t.Fatal("no worker was killed")
	}
	if st := d.Master().Stats(); st.WorkersLost+st.WorkersRemoved < 1 {
		t.Errorf("the master did not notice the lost worker: %+v", st)
	}
	if res.Jobs != 9 || res.Retries != 0 {
		t.Errorf("counts %+v: a lost worker's task is Work Queue's to re-send, not a failure", res.TrackerCounts)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s", firstDiff(got, want))
	}
}

// TestResumeSkipsFinishedBlocks stops a run half way and runs it again: no
// cell of a block that finished is computed again, and the result is that
// of an uninterrupted run.
func TestResumeSkipsFinishedBlocks(t *testing.T) {
	set := itemSet(t, 8)
	log := filepath.Join(t.TempDir(), "calls")
	fn := openPair(t, pairScript(t, t.TempDir(), `printf '%s\t%s\n' "$1" "$2" >> `+log))
	want := multicoreLines(t, set, set, fn, false)
	os.Remove(log)
	checkpoint := filepath.Join(t.TempDir(), "ck.matrix")
	d := localDriver(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := AllPairs{A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), JobW: 2, JobH: 3,
		Progress: func(cells int64) {
			if cells >= 20 {
				cancel()
			}
		}}
	if _, _, err := runAllPairsAt(ctx, t, testConfig(t, d, "allpairs"), p, checkpoint); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	kept, err := sparsematrix.Load(checkpoint)
	if err != nil || len(kept) < 20 || len(kept) >= 64 {
		t.Fatalf("checkpoint holds %d cells (%v)", len(kept), err)
	}
	killUnder(filepath.Dir(checkpoint))
	os.Remove(log)

	p.Progress = nil
	p.JobW, p.JobH = 0, 0 // from the plan file
	got, res, err := runAllPairsAt(context.Background(), t, testConfig(t, d, "allpairs"), p, checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s", firstDiff(got, want))
	}
	if res.JobW != 2 || res.JobH != 3 || res.Resumed != int64(len(kept)) || res.Computed+res.Resumed != 64 {
		t.Errorf("resumed run: %+v", res)
	}
	calls := cellLog(t, log)
	index := map[string]int{}
	for i, it := range set.Items {
		index[it.Path] = i
	}
	for call := range calls {
		a, b, _ := strings.Cut(call, "\t")
		if _, ok := kept[sparsematrix.Key{X: index[a], Y: index[b]}]; ok {
			// A block with a kept cell may only run again if it was not
			// finished.
			x, y := index[a]/2*2, index[b]/3*3
			complete := true
			for i := x; i < min(x+2, 8); i++ {
				for j := y; j < min(y+3, 8); j++ {
					_, ok := kept[sparsematrix.Key{X: i, Y: j}]
					complete = complete && ok
				}
			}
			if complete {
				t.Errorf("cell %s of a finished block was computed again", call)
			}
		}
	}
}

// TestCheckpointOfAnotherProblem: a checkpoint left by another problem is
// refused, not taken for this one's cells.
func TestCheckpointOfAnotherProblem(t *testing.T) {
	set := itemSet(t, 4)
	d := localDriver(t)
	checkpoint := filepath.Join(t.TempDir(), "ck.matrix")
	run := func(spec string, a *allpairs.Set) error {
		fn := openPair(t, spec)
		_, _, err := runAllPairsAt(context.Background(), t, testConfig(t, d, "allpairs"), AllPairs{
			A: a, B: a, Func: FunctionOf(fn.Info(), "", 0), JobW: 2, JobH: 2}, checkpoint)
		return err
	}
	if err := run("builtin:bytediff", set); err != nil {
		t.Fatal(err)
	}
	if err := run("builtin:swalign", set); err == nil || !strings.Contains(err.Error(), "holds cells of another function") {
		t.Errorf("another function: %v", err)
	}
	if err := run("builtin:bytediff", itemSet(t, 3)); err == nil || !strings.Contains(err.Error(), "holds cells of other items") {
		t.Errorf("a smaller problem: %v", err)
	}
}

// TestWavefrontFailingBlock: a block whose function fails is given up, the
// blocks that depend on it are not run, and everything else is kept.
func TestWavefrontFailingBlock(t *testing.T) {
	// R[1,7] is the only cell whose left input is 7.
	fn := openCell(t, testutil_writeCellScript(t, `[ "$(cat "$1")" = 7 ] && { echo "left is 7" >&2; exit 1; }`))
	p := newWavefront(t, 12)
	cfg := testConfig(t, localDriver(t), "wavefront")
	cfg.Retries = -1
	res, err := p.run(context.Background(), t, cfg, fn, 4)
	var fe *FailedError
	if !errors.As(err, &fe) || len(fe.Blocks) != 1 || fe.Blocks[0].Block != "x1-y5" {
		t.Fatalf("err = %v, want block x1-y5 failed", err)
	}
	if tail := fe.Blocks[0].StderrTail(); !strings.Contains(tail, "left is 7") || !strings.Contains(tail, "(1,7)") {
		t.Errorf("stderr tail %q", tail)
	}
	// Blocks y 1…4: 48 cells; the failed block's cells below y 7: 8.
	if res.Computed != 56 || res.NotRun != 80 || len(p.result(t)) != 56 {
		t.Errorf("computed %d, not run %d, kept %d", res.Computed, res.NotRun, len(p.result(t)))
	}
}

// TestWavefrontResume: a second run on a partial checkpoint computes only
// the blocks it lacks.
func TestWavefrontResume(t *testing.T) {
	fn := openCell(t, "builtin:sum")
	p := newWavefront(t, 10)
	want := p.multicore(t, fn)
	d := localDriver(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := testConfig(t, d, "wavefront")
	done, err := sparsematrix.Open(p.matrix, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = RunWavefront(ctx, cfg, &Wavefront{
		Func: FunctionOf(fn.Info(), "", 0), Region: p.region(), Checkpoint: p.matrix, JobSize: 3,
		Value: func(x, y int) (funcs.Input, error) { return funcs.Input{Path: p.dir.CellPath(x, y)}, nil },
		Out:   done,
		Progress: func(cells int) {
			if cells >= 30 {
				cancel()
			}
		},
	})
	done.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	kept := len(p.result(t))
	res, err := p.run(context.Background(), t, testConfig(t, d, "wavefront"), fn, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.JobSize != 3 || res.Skipped != kept || res.Computed != 100-kept {
		t.Errorf("resumed: %+v with %d kept", res, kept)
	}
	if got := p.result(t); !equalCells(got, want) {
		t.Errorf("%d cells, or values differ", len(got))
	}
}

// TestJobSizeFromModel: with no job size, the function is measured and the
// model sizes the jobs, and says so.
func TestJobSizeFromModel(t *testing.T) {
	set := itemSet(t, 20)
	fn := openPair(t, pairScript(t, t.TempDir(), ""))
	var explained bytes.Buffer
	cfg := testConfig(t, localDriver(t), "allpairs")
	cfg.Explain = &explained
	got, res, err := runAllPairs(context.Background(), t, cfg, AllPairs{A: set, B: set, Func: FunctionOf(fn.Info(), "", 0), Pair: fn})
	if err != nil {
		t.Fatal(err)
	}
	if want := multicoreLines(t, set, set, fn, false); !slices.Equal(got, want) {
		t.Errorf("%s", firstDiff(got, want))
	}
	for _, want := range []string{"the function takes", "sampled here", "models (400 cells", "jobs of "} {
		if !strings.Contains(explained.String(), want) {
			t.Errorf("explanation lacks %q:\n%s", want, explained.String())
		}
	}
	if res.JobW < 1 || res.JobH < 1 || res.Predicted <= 0 {
		t.Errorf("result %+v", res)
	}
}

// TestBatchSystems runs both abstractions as jobs of the real single-node
// SLURM and Grid Engine, on the shared filesystem they see.
func TestBatchSystems(t *testing.T) {
	set := itemSet(t, 5)
	pair := openPair(t, pairScript(t, t.TempDir(), ""))
	wantPairs := multicoreLines(t, set, set, pair, true)
	cell := openCell(t, "builtin:sum")
	for _, kind := range []string{"slurm", "sge"} {
		t.Run(kind, func(t *testing.T) {
			testutil.NeedBatchSystem(t, kind)
			d, err := OpenDriver(kind, batch.Options{Spool: t.TempDir(), PollInterval: 250 * time.Millisecond}, workqueue.Config{}, "", FastAbort{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			cfg := testConfig(t, d, "allpairs")
			cfg.Kind = kind
			got, _, err := runAllPairs(context.Background(), t, cfg, AllPairs{
				A: set, B: set, Func: FunctionOf(pair.Info(), "", 0), Symmetric: true, JobW: 3, JobH: 3})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, wantPairs) {
				t.Errorf("All-Pairs: %s", firstDiff(got, wantPairs))
			}
			p := newWavefront(t, 6)
			if _, err := p.run(context.Background(), t, testConfig(t, d, "wavefront"), cell, 4); err != nil {
				t.Fatal(err)
			}
			if got, want := p.result(t), p.multicore(t, cell); !equalCells(got, want) {
				t.Errorf("Wavefront: %d cells, want %d, or values differ", len(got), len(want))
			}
		})
	}
}

// checkMeanJobCells checks a run's mean cells a job against its cells
// computed over its blocks done: every job ran once, as a process unless
// on the in-process back end, where no job says what a job costs. The
// blocks at the edges are smaller, so this is not a whole block's cells.
func checkMeanJobCells(t *testing.T, backend string, got float64, computed int64, done int) {
	t.Helper()
	want := 0.0
	if backend != inProcess && done > 0 {
		want = float64(computed) / float64(done)
	}
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("on %s, %v cells a job, want %v (%d cells in %d blocks)", backend, got, want, computed, done)
	}
}
