package makeflow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/wq"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/worker"
)

func TestBatchCheck(t *testing.T) {
	wq := BatchOptions{ShipFiles: true}
	shared := BatchOptions{ShipFiles: true, SharedFS: []string{"/data"}}
	tests := []struct {
		name string
		opts BatchOptions
		src  string
		want []string // error messages' starts, in order; none for no error
	}{
		{"relative names", wq, "out: in\n\tcat in > out\n", nil},
		{"absolute input", wq, "out: /etc/hostname\n\tcat /etc/hostname > out\n",
			[]string{"Makeflow:1:6: /etc/hostname: a rule that runs remotely runs in a sandbox of its own"}},
		{"absolute output", wq, "/tmp/out:\n\ttouch /tmp/out\n", []string{"Makeflow:1:1: /tmp/out:"}},
		{"escaping name", wq, "out: ../in\n\tcat ../in > out\n", []string{"Makeflow:1:6: ../in:"}},
		{"several, in order", wq, "a: /x/1\n\tcat /x/1 > a\nb: /x/2 ../y\n\tcat /x/2 ../y > b\n",
			[]string{"Makeflow:1:4:", "Makeflow:3:4:", "Makeflow:3:9:"}},
		{"renamed", wq, "out: /etc/hostname->h\n\tcat h > out\n", nil},
		{"shared filesystem", shared, "out: /data/ref /data\n\tcat /data/ref > out\n", nil},
		{"outside the shared filesystem", shared, "out: /database/ref\n\tcat /database/ref > out\n", []string{"Makeflow:1:6: /database/ref:"}},
		{"LOCAL rule", wq, "out: /etc/hostname\n\tLOCAL cat /etc/hostname > out\n", nil},
		{"nested workflow", wq, "out: /abs/sub.mf\n\tMAKEFLOW /abs/sub.mf\n", nil},
		{"shared-filesystem driver", BatchOptions{}, "/tmp/out: /etc/hostname ../x\n\tcat /etc/hostname ../x > /tmp/out\n", nil},
		{"relative shared directory", BatchOptions{SharedFS: []string{"data"}}, "out:\n\ttouch out\n",
			[]string{"Makeflow: shared filesystem directory data must be an absolute path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("Makeflow", []byte(tt.src), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.opts.Check(w)
			var list ErrorList
			if err != nil && !errors.As(err, &list) {
				t.Fatalf("error %v is not an ErrorList", err)
			}
			if len(list) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(list), len(tt.want), err)
			}
			for i, want := range tt.want {
				if got := list[i].Error(); !strings.HasPrefix(got, want) {
					t.Errorf("error %d = %q, want it to start with %q", i, got, want)
				}
			}
		})
	}
}

// startWorkQueue returns a Batch executor on a Work Queue master of its own
// (on a free port of 127.0.0.1) and starts n rightsize workers for it in
// this process, each with one core; they stop when the test ends.
func startWorkQueue(t *testing.T, n int, opts BatchOptions) (*Batch, *workqueue.Master) {
	t.Helper()
	d, err := wq.Open(workqueue.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Master()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		workdir := t.TempDir() // removed after the worker stops
		go func() {
			defer wg.Done()
			worker.Run(ctx, worker.Config{
				Masters: []string{m.Addr().String()}, Cores: 1, MemoryMB: 1000, DiskMB: 1000,
				Workdir: workdir, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			})
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	opts.ShipFiles = true
	b := NewBatch(d, opts)
	t.Cleanup(func() { closeBatch(t, b) })
	return b, m
}

func closeBatch(t *testing.T, b *Batch) {
	if err := b.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// runRemote runs the workflow with b as its remote executor.
func (tr *testRun) runRemote(ctx context.Context, b *Batch, opts Options) (*Report, error) {
	tr.t.Helper()
	opts.Remote = b
	if opts.RemoteLimits.Jobs == 0 {
		opts.RemoteLimits.Jobs = 100
	}
	return tr.run(ctx, opts)
}

func TestBatchWorkQueue(t *testing.T) {
	tr := newTestRun(t, `
X=exported
export X
.MAKEFLOW CATEGORY align
.MAKEFLOW CORES 1
.MAKEFLOW MEMORY 100
part.1: ref query.1
	wc -c < ref > part.1; cat query.1 >> part.1
part.2: ref query.2
	wc -c < ref > part.2; cat query.2 >> part.2
part.3: ref query.3
	wc -c < ref > part.3; cat query.3 >> part.3
renamed/out.1->result: part.1->in
	cat in > result; echo $X >> result; ls > ls.out
deep/er/out.2: part.2
	cat part.2 > deep/er/out.2
all: renamed/out.1 deep/er/out.2 part.3
	LOCAL cat renamed/out.1 deep/er/out.2 part.3 > all
`)
	ref := strings.Repeat("r", 1<<20) + "\n"
	tr.write("ref", ref)
	for _, q := range []string{"1", "2", "3"} {
		tr.write("query."+q, q+"\n")
	}
	b, m := startWorkQueue(t, 1, BatchOptions{})
	rep, err := tr.runRemote(context.Background(), b, Options{})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, tr.out.String())
	}
	if rep.Ran != 6 {
		t.Errorf("ran %d rules, want 6", rep.Ran)
	}
	if got, want := tr.read("all"), "1048577\n1\nexported\n1048577\n2\n1048577\n3\n"; got != want {
		t.Errorf("all = %q, want %q", got, want)
	}
	// The renamed rule saw its files under their remote names only.
	if tr.exists("result") || tr.exists("in") || tr.exists("ls.out") {
		t.Error("remote names or undeclared files came back to the workflow directory")
	}
	// ref, read by three rules, went to the worker once.
	st := m.Stats()
	if st.TasksComplete != 5 {
		t.Errorf("the master completed %d tasks, want 5 (the LOCAL rule runs here)", st.TasksComplete)
	}
	if st.BytesSent < int64(len(ref)) || st.BytesSent > int64(len(ref))+64<<10 {
		t.Errorf("the master sent %d bytes; the shared %d-byte input should go once", st.BytesSent, len(ref))
	}
	if !b.cached["ref"] || b.cached["query.1"] {
		t.Errorf("cached = %v, want ref only", b.cached)
	}
}

func TestBatchWorkQueueFailures(t *testing.T) {
	tr := newTestRun(t, `
bad:
	echo boom >&2; exit 3
after: bad
	touch after
lazy:
	echo forgot to make it
good:
	touch good
slow:
WALL_TIME=1
	sleep 30; touch slow
`)
	b, _ := startWorkQueue(t, 2, BatchOptions{})
	start := time.Now()
	rep, err := tr.runRemote(context.Background(), b, Options{})
	var runErr *FailedError
	if !errors.As(err, &runErr) {
		t.Fatalf("error = %v, want a *FailedError", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the wall-time limit did not stop the slow rule")
	}
	if !tr.exists("good") || tr.exists("after") {
		t.Error("good should have run and after should not")
	}
	failed := map[string]*Result{}
	for _, f := range rep.Failures {
		failed[f.Rule.Targets[0].Name] = f.Result
	}
	if len(failed) != 3 {
		t.Fatalf("failures: %+v", rep.Failures)
	}
	if r := failed["bad"]; r.ExitCode != 3 || !strings.Contains(string(r.Stderr), "boom") {
		t.Errorf("bad: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	if r := failed["lazy"]; !errors.Is(r.Err, batch.ErrMissingOutput) {
		t.Errorf("lazy: %v, want a missing output", r.Status())
	}
	if r := failed["slow"]; !errors.Is(r.Err, batch.ErrTimeLimit) {
		t.Errorf("slow: %v, want the wall-time limit", r.Status())
	}
	if msg := err.Error(); !strings.Contains(msg, "rule 0 ("+tr.path+":2:1) failed: exit status 3") || !strings.Contains(msg, "stderr: boom") {
		t.Errorf("message:\n%s", msg)
	}
}

func TestBatchWorkQueueCancel(t *testing.T) {
	tr := newTestRun(t, "fast:\n\ttouch fast\nslow: fast\n\tsleep 30; touch slow\n")
	b, m := startWorkQueue(t, 1, BatchOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for m.Stats().TasksRunning == 0 || !strings.Contains(tr.out.String(), "sleep 30") {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	rep, err := tr.runRemote(ctx, b, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want one wrapping context.Canceled", err)
	}
	if rep.Counts.Complete != 1 || rep.Counts.Aborted != 1 {
		t.Errorf("counts %+v", rep.Counts)
	}
	if lines := tr.logLines(); !strings.HasPrefix(lines[len(lines)-1], "# ABORTED ") {
		t.Errorf("log ends with %q", lines[len(lines)-1])
	}
}

// TestBatchSharedFilesystem runs rules through the local-process batch
// driver, which like SLURM runs commands in place on a shared filesystem.
func TestBatchSharedFilesystem(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "abs.txt")
	tr := newTestRun(t, `
copy: `+abs+`
	cat `+abs+` > copy
out.1->out.txt: copy->in.txt
	cat in.txt > out.txt; ls > out.txt.ls
bad: copy
	echo broken >&2; exit 7
`)
	if err := os.WriteFile(abs, []byte("absolute\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	b := NewBatch(batch.NewLocal(batch.Options{Slots: 2}), BatchOptions{})
	defer closeBatch(t, b)
	rep, err := tr.runRemote(context.Background(), b, Options{})
	var runErr *FailedError
	if !errors.As(err, &runErr) || len(rep.Failures) != 1 {
		t.Fatalf("error = %v, want one failed rule", err)
	}
	if f := rep.Failures[0].Result; f.ExitCode != 7 || string(f.Stderr) != "broken\n" {
		t.Errorf("bad: exit %d, stderr %q", f.ExitCode, f.Stderr)
	}
	if tr.read("out.1") != "absolute\n" || tr.exists("out.txt") || tr.exists("out.txt.ls") {
		t.Error("the renaming rule did not run in a sandbox")
	}
	if matches, _ := filepath.Glob(filepath.Join(tr.dir, ".makeflow-sandbox-*")); len(matches) != 0 {
		t.Errorf("sandbox leftovers: %v", matches)
	}
}
