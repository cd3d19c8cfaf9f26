package workqueue

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

var binDir string

func TestMain(m *testing.M) {
	if n := os.Getenv(floodEnv); n != "" {
		os.Exit(floodMaster(n))
	}
	os.Exit(testutil.RunWithCommands(m, func(dir string) {
		binDir = dir
	}, "workqueue"))
}

// startWorkerProcess runs `workqueue worker` as a process, for tests that
// kill it.
func startWorkerProcess(t *testing.T, m *Master, cores int) *exec.Cmd {
	t.Helper()
	workdir := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", fmt.Sprint(cores),
		"--memory", "1000", "--disk", "1000", "-t", "60", "-i", "0.05", "-s", workdir, "-q",
		"127.0.0.1", fmt.Sprint(m.Port()))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		// A killed worker leaves its sandboxes' parent unlistable.
		dirs, _ := filepath.Glob(filepath.Join(workdir, "worker-*", "tasks"))
		for _, d := range dirs {
			os.Chmod(d, 0o700)
		}
	})
	return cmd
}

// TestWorkerKilledMidTaskLosesNothing kills a worker process with SIGKILL
// while it runs tasks; every task still finishes, on the other worker.
func TestWorkerKilledMidTaskLosesNothing(t *testing.T) {
	m := startMaster(t, Config{})
	doomed := startWorkerProcess(t, m, 2)
	dir := t.TempDir()
	const n = 6
	for i := 0; i < n; i++ {
		task := &Task{Command: fmt.Sprintf("sleep 0.3; echo %d > out", i), Tag: fmt.Sprint(i)}
		task.AddOutput(filepath.Join(dir, fmt.Sprintf("out%d", i)), "out", false)
		m.Submit(task)
	}
	testutil.WaitFor(t, "two tasks to run", 30*time.Second, func() bool { return m.Stats().TasksRunning >= 2 })
	doomed.Process.Signal(syscall.SIGKILL)
	startWorkerProcess(t, m, 2)
	got := waitAll(t, m, n)
	for i := 0; i < n; i++ {
		r := got[fmt.Sprint(i)]
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d", i)))
		if !r.OK() || strings.TrimSpace(string(b)) != fmt.Sprint(i) {
			t.Errorf("task %d: %v %v, output file %q", i, r.Status, r.Err, b)
		}
	}
	if st := m.Stats(); st.WorkersLost < 1 {
		t.Errorf("stats do not show the lost worker: %+v", st)
	}
}

// TestHostileWorkers connects peers that break the protocol in various ways:
// each is disconnected with a logged reason and the master goes on serving a
// good worker.
func TestHostileWorkers(t *testing.T) {
	m := startMaster(t, Config{Limits: wire.Limits{Line: 1024, Body: 1 << 16}})
	hello := "workqueue 9 evil Linux x86_64 1\n"
	resources := "resource cores 1 1 1\nresource memory 100 100 100\nresource disk 100 100 100\nresource tag 0\n"
	cases := map[string]string{
		"garbage":           "GET / HTTP/1.0\r\n\r\n",
		"wrong protocol":    "workqueue 99 evil Linux x86_64 1\n",
		"long line":         hello + strings.Repeat("x", 5000) + "\n",
		"unknown message":   hello + resources + "frobnicate\n",
		"huge result":       hello + resources + "result 0 0 99999999999 1 1\n",
		"unrequested file":  hello + resources + "file ../../etc/passwd 5\nhello",
		"stray end":         hello + resources + "end\n",
		"binary":            "\x00\x01\x02\xff\n",
		"nan resources":     hello + "resource cores NaN 1 1\n",
		"negative size":     hello + resources + "result 0 0 -4 1 1\n",
		"half hello":        "workqueue 9",
		"result for nobody": hello + resources + "result 0 0 3 1 424242\nabc" + "frobnicate\n",
	}
	for name, script := range cases {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(script))
		if name == "half hello" {
			conn.(*net.TCPConn).CloseWrite()
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1024)
		var readErr error
		for readErr == nil {
			_, readErr = conn.Read(buf)
		}
		if ne, ok := readErr.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: master kept the connection open", name)
		}
		conn.Close()
	}
	startWorker(t, m, worker.Config{})
	if r := runOne(t, m, "echo still here"); strings.TrimSpace(string(r.Output)) != "still here" {
		t.Errorf("after hostile peers: %+v", r)
	}
}

// TestFastAbortResendsStraggler: once ten tasks of a category have
// finished, a task running far longer than their mean is aborted and sent
// again, and the result and the worker's statistics say so.
func TestFastAbortResendsStraggler(t *testing.T) {
	// No copies: the straggler is to be caught by fast abort, not out-run.
	m := startMaster(t, Config{FastAbort: FastAbort{Multiplier: 3, MinSamples: 10}, Speculation: Speculation{Multiplier: -1}})
	startWorker(t, m, worker.Config{Cores: 2})
	startWorker(t, m, worker.Config{Cores: 2})
	for i := 0; i < 12; i++ {
		m.Submit(&Task{Command: "sleep 0.1", Category: "short", Tag: fmt.Sprint("warm", i)})
	}
	waitAll(t, m, 12)
	// The first attempt hangs; a second one finds the marker and is quick.
	marker := filepath.Join(t.TempDir(), "marker")
	m.Submit(&Task{Command: fmt.Sprintf("if [ -e %s ]; then echo quick; else touch %s; sleep 60; fi", marker, marker),
		Category: "short", Tag: "straggler"})
	r := waitAll(t, m, 1)["straggler"]
	if !r.OK() || strings.TrimSpace(string(r.Output)) != "quick" || r.FastAborts != 1 {
		t.Errorf("straggler: status %v, output %q, fast aborts %d", r.Status, r.Output, r.FastAborts)
	}
	if st := m.Stats(); st.FastAborts != 1 {
		t.Errorf("stats: %d fast aborts", st.FastAborts)
	}
	// Workers says which worker it was, and what each did.
	ws := m.Workers()
	var completed, aborts int
	for _, w := range ws {
		if w.Cores != 2 || w.Running != 0 || w.Addr == "" || w.Host == "" {
			t.Errorf("worker %+v", w)
		}
		completed += w.Completed
		aborts += w.FastAborts
	}
	if len(ws) != 2 || completed != 13 || aborts != 1 {
		t.Errorf("%d workers, %d tasks completed, %d fast aborts; want 2, 13, 1: %+v", len(ws), completed, aborts, ws)
	}
}

func TestCancel(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{Cores: 1})
	running, _ := m.Submit(&Task{Command: "sleep 60", Tag: "running"})
	waiting, _ := m.Submit(&Task{Command: "sleep 60", Tag: "waiting"})
	testutil.WaitFor(t, "the first task to run", 30*time.Second, func() bool { return m.Stats().TasksRunning >= 1 })
	// CancelWaiting leaves the running task alone.
	for _, c := range []struct {
		name   string
		cancel func(int) bool
		id     int
		want   bool
	}{
		{"CancelWaiting(running)", m.CancelWaiting, running, false},
		{"CancelWaiting(waiting)", m.CancelWaiting, waiting, true},
		{"CancelWaiting(waiting) again", m.CancelWaiting, waiting, false},
		{"Cancel(running)", m.Cancel, running, true},
		{"Cancel(running) again", m.Cancel, running, false},
	} {
		if got := c.cancel(c.id); got != c.want {
			t.Fatalf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if r := runOne(t, m, "echo next"); strings.TrimSpace(string(r.Output)) != "next" || r.Tag != "" {
		t.Errorf("after cancelling: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Wait(ctx); err != ErrEmpty {
		t.Errorf("Wait after everything finished or was cancelled: %v", err)
	}
}

func TestInputMissing(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{})
	task := &Task{Command: "cat nope"}
	task.AddInput(filepath.Join(t.TempDir(), "does-not-exist"), "nope", false)
	m.Submit(task)
	r := waitAll(t, m, 1)[""]
	if r.Status != InputMissing || r.Err == nil || !strings.Contains(r.Err.Error(), "does-not-exist") {
		t.Errorf("missing input: %v %v", r.Status, r.Err)
	}
	if r := runOne(t, m, "echo ok"); !r.OK() {
		t.Errorf("worker unusable after a missing input: %+v", r)
	}
}

func TestSubmitRejectsBadTasks(t *testing.T) {
	m := startMaster(t, Config{})
	cases := map[string]*Task{
		"no command":      {},
		"absolute remote": {Command: "x", Inputs: []File{{Local: "/etc/hosts", Remote: "/etc/hosts"}}},
		"dotdot remote":   {Command: "x", Outputs: []File{{Local: "o", Remote: "../o"}}},
		"output no local": {Command: "x", Outputs: []File{{Remote: "o"}}},
		"negative cores":  {Command: "x", Resources: Resources{Cores: -1}},
	}
	for name, task := range cases {
		if _, err := m.Submit(task); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestWorkerSurvivesKilledMaster: a master that vanishes without a word (as
// with kill -9) leaves its worker, which reconnects to the next master it
// knows of.
func TestWorkerSurvivesKilledMaster(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	deadAddr := dead.Addr().String()
	// The master dies while its worker runs its task.
	started := filepath.Join(t.TempDir(), "started")
	task := "touch " + started + "; sleep 60"
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := dead.Accept()
		if err != nil {
			return
		}
		c := wire.NewConn(conn, wire.Limits{})
		c.ReadMessage() // the hello
		c.WriteRaw(fmt.Appendf(nil, "task 1\ncmd %d\n%send\n", len(task), task))
		c.Flush()
		accepted <- conn
	}()
	next, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nextAddr := next.Addr().String()
	next.Close() // the next master is not up yet
	startWorkerTo(t, []string{deadAddr, nextAddr})
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never said hello to the first master")
	}
	testutil.WaitFor(t, "the first master's task to start", 30*time.Second, func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	conn.(*net.TCPConn).SetLinger(0) // reset, as a killed process's socket is
	conn.Close()
	dead.Close()
	m := startMaster(t, Config{Addr: nextAddr})
	if r := runOne(t, m, "echo survived"); strings.TrimSpace(string(r.Output)) != "survived" {
		t.Errorf("task on the next master: %+v", r)
	}
}

func startWorkerTo(t *testing.T, masters []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	workdir := t.TempDir() // removed after the worker stops
	go func() {
		defer close(done)
		worker.Run(ctx, worker.Config{Masters: masters, Cores: 1, MemoryMB: 100, DiskMB: 100, Workdir: workdir,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: testutil.Logger(t).With("side", "worker")})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestKeepalive: a worker that stops answering is dropped; one that answers
// check stays.
func TestKeepalive(t *testing.T) {
	m := startMaster(t, Config{KeepaliveInterval: 200 * time.Millisecond, KeepaliveTimeout: 300 * time.Millisecond})
	relay, checks := checkRelay(t, m)
	startWorker(t, m, worker.Config{Masters: []string{relay}})
	silent, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.Write([]byte("workqueue 9 mute Linux x86_64 1\nresource cores 1 1 1\nresource tag 0\n"))
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 256)
	for {
		n, err := silent.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the master never dropped a worker that does not answer")
			}
			break
		}
	}
	if !strings.Contains(string(got), "check\n") {
		t.Errorf("the master did not ask before dropping: %q", got)
	}
	// The drop reaches the master's loop just after the socket closes.
	testutil.WaitFor(t, "the silent worker's drop, the one that answers left", 10*time.Second, func() bool { return m.Stats().WorkersConnected == 1 })
	// Several keepalive rounds: a worker is checked again only if it
	// answered the check before (one silent for Interval+Timeout is
	// dropped instead), and the relay takes no second connection.
	testutil.WaitFor(t, "three keepalive checks of the worker that answers", 30*time.Second, func() bool { return checks.Load() >= 3 })
	if n := m.Stats().WorkersConnected; n != 1 {
		t.Errorf("%d workers connected after keepalive rounds, want 1", n)
	}
}

// checkRelay relays one worker connection to m, and no other, counting the
// keepalive checks the master sends through it, so that a test waits for
// keepalive rounds rather than for time. It returns the address to give
// the worker.
func checkRelay(t *testing.T, m *Master) (addr string, checks *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	checks = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		down, err := ln.Accept()
		ln.Close() // a worker dropped and back would be another connection
		if err != nil {
			return
		}
		defer down.Close()
		up, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
		if err != nil {
			return
		}
		defer up.Close()
		go func() {
			io.Copy(up, down)
			up.Close()
		}()
		r := bufio.NewReader(up)
		for {
			line, err := r.ReadString('\n')
			if line == "check\n" {
				checks.Add(1)
			}
			if _, werr := io.WriteString(down, line); err != nil || werr != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), checks
}

func TestPasswordOurWorker(t *testing.T) {
	cases := []struct {
		name     string
		password string
		wantRun  bool
	}{
		{"right password", "s3cret\n", true},
		{"wrong password", "guess\n", false},
		{"no password", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(notices, 10)
			m := startMaster(t, Config{Password: []byte("s3cret\n"), Notices: slog.New(seen)})
			cfg := worker.Config{}
			if tc.password != "" {
				cfg.Password = []byte(tc.password)
			}
			startWorker(t, m, cfg)
			m.Submit(&Task{Command: "echo in"})
			if !tc.wantRun {
				// Refused, and refused again as it retries: the task
				// has had its chances.
				for range 3 {
					if n := seen.next(t); !strings.Contains(n, "wrong or missing password") {
						t.Fatalf("notice %q, want a wrong or missing password", n)
					}
				}
				if st := m.Stats(); st.WorkersJoined != 0 || st.TasksRunning+st.TasksComplete != 0 {
					t.Errorf("%d workers joined, %d tasks running, %d complete; want none", st.WorkersJoined, st.TasksRunning, st.TasksComplete)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if r, err := m.Wait(ctx); err != nil || !r.OK() {
				t.Errorf("task behind the password: %v %+v", err, r)
			}
		})
	}
}

// TestCloseWithSilentPeer: Close does not wait for a peer that connected
// and said nothing.
func TestCloseWithSilentPeer(t *testing.T) {
	m, err := Listen(Config{Addr: "127.0.0.1:0", HandshakeTimeout: time.Minute, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Close's subject is a peer the master has accepted: one still in the
	// kernel's queue would not test it.
	testutil.WaitFor(t, "the master to accept the peer", 10*time.Second, func() bool { return m.admit.inHandshake() == 1 })
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second): // far below the handshake deadline
		t.Fatal("Close waited for a silent peer")
	}
}

// TestFastAbortDropsSlowWorker: a worker on which two tasks in a row turn
// out stragglers is dropped and kept out; the tasks finish elsewhere.
func TestFastAbortDropsSlowWorker(t *testing.T) {
	m := startMaster(t, Config{FastAbort: FastAbort{Multiplier: 4, BlockFor: time.Minute}, Speculation: Speculation{Multiplier: -1}})
	slowDir, fastDir := t.TempDir(), t.TempDir()
	startWorker(t, m, worker.Config{Cores: 1, Workdir: slowDir})
	startWorker(t, m, worker.Config{Cores: 1, Workdir: fastDir})
	marker := filepath.Join(t.TempDir(), "slow-from-now-on")
	// Quick everywhere until the marker exists; then hanging on the slow
	// worker, recognised by its sandbox's path.
	cmd := fmt.Sprintf(`if [ -e %s ]; then case "$(pwd)" in %s/*) sleep 60;; esac; fi; sleep 0.05; echo done`, marker, slowDir)
	for i := 0; i < 12; i++ {
		m.Submit(&Task{Command: cmd, Tag: fmt.Sprint("warm", i)})
	}
	waitAll(t, m, 12)
	os.WriteFile(marker, nil, 0o644)
	// Enough tasks that some still wait when the first straggler is caught,
	// so that the slow worker gets a second one.
	for i := 0; i < 20; i++ {
		m.Submit(&Task{Command: cmd, Tag: fmt.Sprint(i)})
	}
	got := waitAll(t, m, 20)
	for tag, r := range got {
		if !r.OK() || strings.TrimSpace(string(r.Output)) != "done" {
			t.Errorf("task %s: %v %q", tag, r.Status, r.Output)
		}
	}
	if st := m.Stats(); st.WorkersRemoved < 1 || st.FastAborts < 2 {
		t.Errorf("the slow worker was not dropped: %d removed, %d fast aborts", st.WorkersRemoved, st.FastAborts)
	}
}
