package factory

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// workqueueBin is the real `workqueue` command, built once for the tests:
// the factory's workers run it.
var workqueueBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		workqueueBin = filepath.Join(dir, "workqueue")
	}, "workqueue"))
}

// waitTimeout bounds every wait for workers or tasks; they arrive within
// seconds here, so this is only reached when something is broken.
const waitTimeout = 90 * time.Second

// queueTimeout bounds the wait for workers submitted to the local SLURM or
// Grid Engine: their two CPUs are shared with every other test that
// submits there (go test runs packages in parallel), whose jobs may hold
// them for minutes (TestBatchWorkers took 67 s here once, 5 s alone).
const queueTimeout = 5 * time.Minute

// run is one factory under test, with everything it reported.
type run struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan error
	log    *testutil.SyncBuffer

	mu        sync.Mutex
	counts    Counts
	maxActive int
}

// startFactory runs a factory with cfg, filling in what every test wants:
// quick looks at the master, a log, the real worker command with a
// workspace of the test's own (marker, by which its processes are found).
func startFactory(t testing.TB, cfg Config, marker string) *run {
	t.Helper()
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Worker.Command == nil {
		cfg.Worker.Command = []string{workqueueBin, "worker"}
		cfg.Worker.Args = append(cfg.Worker.Args, "-i", "0.05", "-s", marker)
	}
	if cfg.Worker.Dir == "" {
		cfg.Worker.Dir = t.TempDir()
	}
	r := &run{t: t, done: make(chan error, 1), log: &testutil.SyncBuffer{}}
	cfg.Logger = slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Report = func(c Counts) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.counts = c
		r.maxActive = max(r.maxActive, c.Queued+c.Running)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitTimeout):
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("factory log:\n%s", r.log)
		}
	})
	return r
}

func (r *run) snapshot() (Counts, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts, r.maxActive
}

// stop cancels the factory and returns what Run returned.
func (r *run) stop() error {
	r.t.Helper()
	r.cancel()
	return r.wait()
}

// wait returns what Run returned.
func (r *run) wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(waitTimeout):
		r.t.Fatalf("the factory did not return\n%s", r.log)
		return nil
	}
}

func startMaster(t testing.TB, cfg workqueue.Config) *workqueue.Master {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	m, err := workqueue.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func masterAddr(m *workqueue.Master) string { return "127.0.0.1:" + strconv.Itoa(m.Port()) }

// workerPIDs returns the worker processes whose command line holds marker.
func workerPIDs(t *testing.T, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		// The worker itself, not the shell that started it.
		if len(args) > 1 && args[0] == workqueueBin && args[1] == "worker" && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// submitTasks submits n tasks running command to m.
func submitTasks(t testing.TB, m *workqueue.Master, n int, command string) {
	t.Helper()
	for i := range n {
		if _, err := m.Submit(&workqueue.Task{Command: command, Tag: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitResults waits for n tasks and fails the test unless all succeeded.
func waitResults(t testing.TB, m *workqueue.Master, n int) []*workqueue.Result {
	t.Helper()
	return waitResultsWithin(t, m, n, waitTimeout)
}

// waitResultsWithin is waitResults, failing the test after within.
func waitResultsWithin(t testing.TB, m *workqueue.Master, n int, within time.Duration) []*workqueue.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var rs []*workqueue.Result
	for range n {
		r, err := m.Wait(ctx)
		if err != nil {
			t.Fatalf("after %d of %d tasks: %v", len(rs), n, err)
		}
		if !r.OK() {
			t.Errorf("task %s: %v exit %d: %s", r.Tag, r.Status, r.ExitCode, r.Output)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestLocalWorkers runs the factory on the local driver for a real master:
// it keeps the minimum while the master is idle, replaces a worker killed
// with SIGKILL, grows to the maximum for the master's tasks and no further,
// and removes every worker when stopped.
func TestLocalWorkers(t *testing.T) {
	m := startMaster(t, workqueue.Config{})
	marker := t.TempDir()
	r := startFactory(t, Config{
		Driver: batchtest.Local(t, 8),
		Master: masterAddr(m),
		Worker: Worker{Cores: 1, MemoryMB: 200, DiskMB: 200, IdleTimeout: time.Minute},
		Limits: Limits{Min: 2, Max: 3},
	}, marker)
	connected := func(n int) func() bool {
		return func() bool { return m.Stats().WorkersConnected == n }
	}

	// The minimum, with nothing to do.
	testutil.WaitFor(t, "two workers", waitTimeout, connected(2))
	if c, _ := r.snapshot(); c.Running != 2 || c.Queued != 0 || c.Submitted != 2 {
		t.Fatalf("counts %+v, want 2 running of 2 submitted", c)
	}

	// A worker killed is replaced.
	pids := workerPIDs(t, marker)
	if len(pids) != 2 {
		t.Fatalf("worker processes %v, want 2", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the replacement", waitTimeout, func() bool {
		c, _ := r.snapshot()
		return c.Ended[Killed] == 1 && c.Submitted == 3 && c.Running == 2
	})
	testutil.WaitFor(t, "two workers again", waitTimeout, connected(2))

	// Tasks: grow to the maximum, never past it.
	const n = 9
	submitTasks(t, m, n, "sleep 0.5")
	var most int
	deadline := time.Now().Add(waitTimeout)
	for done := 0; done < n; {
		most = max(most, m.Stats().WorkersConnected)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		res, err := m.Wait(ctx)
		cancel()
		if err == nil {
			if !res.OK() {
				t.Fatalf("task %s: %v %s", res.Tag, res.Status, res.Output)
			}
			done++
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks done", done, n)
		}
	}
	if _, maxActive := r.snapshot(); most != 3 || maxActive != 3 {
		t.Errorf("at most %d workers connected, %d submitted; want 3 and 3 (the maximum)", most, maxActive)
	}

	// Stopping removes every worker.
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	c, _ := r.snapshot()
	if c.Queued+c.Running != 0 || c.Ended[Removed] != 3 {
		t.Errorf("after stopping: %+v, want 3 removed and none left", c)
	}
	if pids := workerPIDs(t, marker); len(pids) != 0 {
		t.Errorf("worker processes left running: %v", pids)
	}
	testutil.WaitFor(t, "the master to lose its workers", waitTimeout, connected(0))
}

// TestProjectThroughCatalog runs the factory with -M: it learns the
// master's tasks from a real catalog and its workers find the master there.
func TestProjectThroughCatalog(t *testing.T) {
	srv, err := catalog.Listen(catalog.ServerConfig{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	cat := "127.0.0.1:" + strconv.Itoa(srv.Port())
	project := "factory-test-" + strconv.Itoa(os.Getpid())
	m := startMaster(t, workqueue.Config{Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})

	r := startFactory(t, Config{
		Driver:   batchtest.Local(t, 4),
		Project:  "factory-test-.*",
		Catalogs: []string{cat},
		Worker:   Worker{Cores: 1, IdleTimeout: time.Minute},
		Limits:   Limits{Min: 0, Max: 2},
	}, t.TempDir())
	testutil.WaitFor(t, "the catalog to list the master", waitTimeout, func() bool {
		c, _ := r.snapshot()
		return c.Known && c.Demand.Masters == 1
	})
	if c, _ := r.snapshot(); c.Submitted != 0 {
		t.Errorf("%d workers submitted for a master without tasks and a minimum of 0", c.Submitted)
	}
	submitTasks(t, m, 4, "echo hello")
	waitResults(t, m, 4)
	if c, _ := r.snapshot(); c.Submitted == 0 || c.Submitted > 2 {
		t.Errorf("%d workers submitted, want 1 or 2", c.Submitted)
	}
}

// TestPassword: the factory asks a master that wants a password for its
// status, and its workers answer the challenge.
func TestPassword(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMaster(t, workqueue.Config{Password: []byte("s3cret\n")})
	r := startFactory(t, Config{
		Driver:       batchtest.Local(t, 2),
		Master:       masterAddr(m),
		PasswordFile: pw,
		Worker:       Worker{Cores: 1, IdleTimeout: time.Minute},
		Limits:       Limits{Max: 1},
	}, t.TempDir())
	submitTasks(t, m, 2, "true")
	waitResults(t, m, 2)
	if c, _ := r.snapshot(); !c.Known || c.Submitted != 1 {
		t.Errorf("counts %+v: want the master's status known and one worker", c)
	}
}

// TestCCToolsWorkers: the factory places CCTools' work_queue_worker, which
// takes the same flags, for a rightsize master.
func TestCCToolsWorkers(t *testing.T) {
	wqw := testutil.NeedCCTools(t, "work_queue_worker")
	m := startMaster(t, workqueue.Config{})
	r := startFactory(t, Config{
		Driver: batchtest.Local(t, 2),
		Master: masterAddr(m),
		Worker: Worker{Command: []string{wqw}, Args: []string{"-s", t.TempDir()}, Cores: 1, MemoryMB: 100, DiskMB: 100, IdleTimeout: time.Minute},
		Limits: Limits{Max: 2},
	}, "")
	submitTasks(t, m, 4, "echo hi")
	waitResults(t, m, 4)
	if err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

// TestGivesUp: jobs the batch system refuses and workers that cannot reach
// their master end the factory, after a few tries, with what went wrong.
func TestGivesUp(t *testing.T) {
	tests := []struct {
		name   string
		worker Worker
		master func(t *testing.T) string
		want   []string
	}{
		{
			name:   "rejected",
			worker: Worker{Cores: 64},
			master: func(t *testing.T) string { return masterAddr(startMaster(t, workqueue.Config{})) },
			want:   []string{"3 failures in a row", "asks for 64 cores", "rejected by the batch system"},
		},
		{
			// Nothing listens there: every worker exits 1 after its
			// one-second timeout.
			name:   "unreachable master",
			worker: Worker{Cores: 1, IdleTimeout: time.Second},
			master: func(t *testing.T) string {
				m := startMaster(t, workqueue.Config{})
				addr := masterAddr(m)
				m.Close()
				return addr
			},
			want: []string{"3 failures in a row", "exited with status 1", "no master reachable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			marker := t.TempDir()
			r := startFactory(t, Config{
				Driver: batchtest.Local(t, 2),
				Master: tt.master(t),
				Worker: tt.worker,
				Limits: Limits{Min: 1, Max: 1, Retries: 2, Backoff: 10 * time.Millisecond},
			}, marker)
			err := r.wait()
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Run = %v, want an error saying %q", err, w)
				}
			}
			if pids := workerPIDs(t, marker); len(pids) != 0 {
				t.Errorf("worker processes left running: %v", pids)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	d := batchtest.Local(t, 1)
	w := Worker{Command: []string{"worker"}}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Master: "h:1", Worker: w, Limits: Limits{Max: 1}}, "no batch driver"},
		{Config{Driver: d, Master: "h:1", Limits: Limits{Max: 1}}, "no worker command"},
		{Config{Driver: d, Worker: w, Limits: Limits{Max: 1}}, "need a master"},
		{Config{Driver: d, Master: "h:1", Project: "p", Worker: w, Limits: Limits{Max: 1}}, "not both"},
		{Config{Driver: d, Master: "h", Worker: w, Limits: Limits{Max: 1}}, "master address"},
		{Config{Driver: d, Master: "h:99999", Worker: w, Limits: Limits{Max: 1}}, "bad port"},
		{Config{Driver: d, Project: "(", Worker: w, Limits: Limits{Max: 1}}, "project pattern"},
		{Config{Driver: d, Master: "h:1", PasswordFile: "/nonexistent/pw", Worker: w, Limits: Limits{Max: 1}}, "password"},
		{Config{Driver: d, Master: "h:1", Worker: Worker{Command: w.Command, Cores: -1}, Limits: Limits{Max: 1}}, "negative"},
		{Config{Driver: d, Master: "h:1", Worker: w, Limits: Limits{Min: 3, Max: 2}}, "more than the maximum"},
	}
	for _, tt := range tests {
		err := Run(context.Background(), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Run = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestWorkerCommandLine(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cfg  Config
		want string
	}{
		{
			Config{Master: "head.example.org:9123", Worker: Worker{Command: []string{"/opt/rs/workqueue", "worker"}}},
			`'/opt/rs/workqueue' 'worker' '-t' '300' 'head.example.org' '9123'`,
		},
		{
			Config{Project: "it's.*", Catalogs: []string{"c1:9097", "c2:9097"}, PasswordFile: pw,
				Worker: Worker{Command: []string{"work_queue_worker"}, Cores: 4, MemoryMB: 8000, DiskMB: 100, IdleTimeout: 1500 * time.Millisecond, Args: []string{"--single-shot"}}},
			`'work_queue_worker' '-t' '2' '--cores' '4' '--memory' '8000' '--disk' '100' '-P' '` + pw + `' '--single-shot' '-M' 'it'\''s.*' '-C' 'c1:9097,c2:9097'`,
		},
	}
	for _, tt := range tests {
		tt.cfg.Driver = batchtest.Local(t, 1)
		tt.cfg.Limits.Max = 1
		if _, _, err := tt.cfg.validate(); err != nil {
			t.Fatal(err)
		}
		job := tt.cfg.job(1)
		if job.Command != tt.want {
			t.Errorf("command\n%s\nwant\n%s", job.Command, tt.want)
		}
		w := tt.cfg.Worker
		if job.Resources != (batch.Resources{Cores: w.Cores, MemoryMB: w.MemoryMB, DiskMB: w.DiskMB}) {
			t.Errorf("resources %+v", job.Resources)
		}
	}
}
