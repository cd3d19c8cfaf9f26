package workqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
