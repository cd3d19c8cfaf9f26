package workqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// startMaster starts a master on a free loopback port, closed at cleanup.
func startMaster(t *testing.T, cfg Config) *Master {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t)
	}
	m, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// startWorker runs one of our workers against m until the test ends.
func startWorker(t *testing.T, m *Master, cfg worker.Config) {
	t.Helper()
	if cfg.Masters == nil && cfg.Project == "" {
		cfg.Masters = []string{fmt.Sprintf("127.0.0.1:%d", m.Port())}
	}
	if cfg.Cores == 0 {
		cfg.Cores = 2
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB, cfg.DiskMB = 1000, 1000
	}
	if cfg.Workdir == "" {
		cfg.Workdir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(t).With("side", "worker")
	}
	cfg.MinBackoff = 50 * time.Millisecond
	cfg.MaxBackoff = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.Run(ctx, cfg)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitAll collects n results, failing the test after a minute.
func waitAll(t *testing.T, m *Master, n int) map[string]*Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]*Result{}
	for len(got) < n {
		r, err := m.Wait(ctx)
		if err != nil {
			t.Fatalf("after %d of %d results: %v", len(got), n, err)
		}
		got[r.Tag] = r
	}
	return got
}

// exercise submits tasks that use every kind of file and checks their
// results; it runs against our worker and CCTools' alike.
func exercise(t *testing.T, m *Master, dir string) {
	t.Helper()
	shared := filepath.Join(dir, "shared.dat")
	os.WriteFile(shared, []byte(strings.Repeat("x", 1000)), 0o644)
	indir := filepath.Join(dir, "indir")
	os.MkdirAll(filepath.Join(indir, "sub"), 0o755)
	os.WriteFile(filepath.Join(indir, "a.txt"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(indir, "sub", "b.txt"), []byte("b\n"), 0o644)

	for i := 0; i < 6; i++ {
		task := &Task{
			Command: fmt.Sprintf("wc -c < shared.dat > out.txt; cat msg >> out.txt; echo task %d; echo $GREETING", i),
			Env:     []string{"GREETING=hello there"},
			Tag:     fmt.Sprintf("t%d", i),
		}
		task.AddInput(shared, "", true)
		task.AddInputBuffer([]byte(fmt.Sprintf("message %d\n", i)), "msg", false)
		task.AddOutput(filepath.Join(dir, fmt.Sprintf("out%d.txt", i)), "out.txt", false)
		if _, err := m.Submit(task); err != nil {
			t.Fatal(err)
		}
	}
	fail := &Task{Command: "echo oops >&2; exit 3", Tag: "fail"}
	fail.AddOutput(filepath.Join(dir, "never.txt"), "never.txt", false)
	m.Submit(fail)
	tree := &Task{Command: "mkdir -p res/x && cp -r in/* res/ && echo c > res/x/c.txt", Tag: "tree"}
	tree.AddInput(indir, "in", true)
	tree.AddOutput(filepath.Join(dir, "res"), "res", false)
	m.Submit(tree)
	renamed := &Task{Command: "cat 'my input' > 'my output'", Tag: "spaces"}
	renamed.AddInputBuffer([]byte("spaced\n"), "my input", true)
	renamed.AddOutput(filepath.Join(dir, "spaced out.txt"), "my output", false)
	m.Submit(renamed)

	got := waitAll(t, m, 9)
	for i := 0; i < 6; i++ {
		r := got[fmt.Sprintf("t%d", i)]
		if !r.OK() {
			t.Errorf("task %d: %v exit %d %v\n%s", i, r.Status, r.ExitCode, r.Err, r.Output)
			continue
		}
		if want := fmt.Sprintf("task %d\nhello there\n", i); string(r.Output) != want {
			t.Errorf("task %d output %q, want %q", i, r.Output, want)
		}
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d.txt", i)))
		if want := fmt.Sprintf("1000\nmessage %d\n", i); string(out) != want {
			t.Errorf("out%d.txt = %q, want %q", i, out, want)
		}
	}
	if r := got["fail"]; r.ExitCode != 3 || r.OK() || !bytes.Contains(r.Output, []byte("oops")) {
		t.Errorf("failing task: status %v exit %d output %q", r.Status, r.ExitCode, r.Output)
	} else if r.Status != OutputMissing {
		t.Errorf("failing task without its output: status %v, want output missing", r.Status)
	}
	if r := got["tree"]; !r.OK() {
		t.Errorf("directory task: %v %v %s", r.Status, r.Err, r.Output)
	}
	var files []string
	filepath.Walk(filepath.Join(dir, "res"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel+"="+strings.TrimSpace(string(b)))
		}
		return nil
	})
	sort.Strings(files)
	if want := "res/a.txt=a res/sub/b.txt=b res/x/c.txt=c"; strings.Join(files, " ") != want {
		t.Errorf("directory output: %v, want %s", files, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "spaced out.txt")); string(b) != "spaced\n" {
		t.Errorf("names with spaces: %q", b)
	}
	if _, err := m.Wait(context.Background()); !errors.Is(err, ErrEmpty) {
		t.Errorf("Wait with nothing outstanding: %v", err)
	}
}

func TestMasterWithOurWorker(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{})
	exercise(t, m, t.TempDir())
	st := m.Stats()
	if st.TasksComplete != 9 || st.TasksFailed != 1 || st.WorkersConnected != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// TestJoinedHook: Config.Joined hears of each worker once, with where it
// connects from and what it announced.
func TestJoinedHook(t *testing.T) {
	joined := make(chan WorkerInfo, 4)
	m := startMaster(t, Config{Joined: func(w WorkerInfo) { joined <- w }})
	startWorker(t, m, worker.Config{Cores: 3, Features: []string{"gpu-model-x", "licensed"}})
	select {
	case w := <-joined:
		tcp, ok := w.Addr.(*net.TCPAddr)
		if !ok || !tcp.IP.IsLoopback() || w.Host == "" || w.Cores != 3 ||
			!slices.Equal(w.Features, []string{"gpu-model-x", "licensed"}) {
			t.Errorf("joined %+v", w)
		}
	case <-time.After(time.Minute):
		t.Fatal("no worker joined in a minute")
	}
	// A task run and its result reported do not make it join again.
	m.Submit(&Task{Command: "true"})
	waitAll(t, m, 1)
	select {
	case w := <-joined:
		t.Errorf("joined again: %+v", w)
	default:
	}
}

// TestWorkerDrain: a draining worker finishes the task it holds, whose
// output the master still fetches, and takes no more; the next task waits
// for another worker.
func TestWorkerDrain(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMaster(t, Config{})
	drain := make(chan struct{})
	first := t.TempDir()
	startWorker(t, m, worker.Config{Cores: 2, Workdir: first, Drain: drain})
	m.Submit(&Task{Tag: "held", Command: "cat " + fifo + " > out", Outputs: []File{{Local: filepath.Join(dir, "held.out"), Remote: "out"}}})
	// Opening the pipe waits for the task to read it: it runs.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	close(drain)
	testutil.WaitFor(t, "the master to stop counting the drained worker's cores", time.Minute, func() bool { return m.Stats().CoresTotal == 0 })
	m.Submit(&Task{Tag: "next", Command: "pwd"})
	w.WriteString("done\n")
	w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.Wait(ctx)
	if err != nil || r.Tag != "held" || r.Status != Success {
		t.Fatalf("held task: %+v, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "held.out")); string(b) != "done\n" {
		t.Errorf("held task's output %q", b)
	}
	second := t.TempDir()
	startWorker(t, m, worker.Config{Cores: 1, Workdir: second})
	r, err = m.Wait(ctx)
	if err != nil || r.Tag != "next" || !strings.HasPrefix(string(r.Output), second) {
		t.Fatalf("next task ran on the drained worker, or not at all: %+v, %v", r, err)
	}
}
