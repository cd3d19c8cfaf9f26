package worker

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// fakeMaster accepts one worker and hands the test a wire.Conn after the
// worker's hello and resource report.
type fakeMaster struct {
	ln   net.Listener
	conn net.Conn
	c    *wire.Conn
}

func newFakeMaster(t *testing.T) *fakeMaster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakeMaster{ln: ln}
}

func (f *fakeMaster) addr() string { return f.ln.Addr().String() }

func (f *fakeMaster) accept(t *testing.T) {
	t.Helper()
	conn, err := f.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	f.conn, f.c = conn, wire.NewConn(conn, wire.Limits{})
	for {
		m, err := f.c.ReadMessage()
		if err != nil {
			t.Fatalf("reading worker's report: %v", err)
		}
		if i, ok := m.(wire.Info); ok && i.Key == "worker-end-time" {
			return
		}
	}
}

func (f *fakeMaster) send(t *testing.T, raw string) {
	t.Helper()
	if err := f.c.WriteRaw([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// expect reads messages until one of type T, skipping info lines.
func expect[T wire.Message](t *testing.T, f *fakeMaster) T {
	t.Helper()
	for {
		m, err := f.c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %T: %v", *new(T), err)
		}
		if v, ok := m.(T); ok {
			return v
		}
		if _, ok := m.(wire.Info); !ok {
			t.Fatalf("got %#v, want %T", m, *new(T))
		}
	}
}

func runWorker(t *testing.T, f *fakeMaster, workdir string) <-chan error {
	t.Helper()
	return runWorkerCores(t, f, workdir, 1)
}

// runWorkerCores runs a worker until the test ends; its workspace is
// removed after it stops.
func runWorkerCores(t *testing.T, f *fakeMaster, workdir string, cores float64) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- Run(ctx, Config{Masters: []string{f.addr()}, Cores: cores, MemoryMB: 100, DiskMB: 1,
			Workdir: workdir, SingleShot: true, Logger: testutil.Logger(t)})
	}()
	t.Cleanup(func() { cancel(); <-done })
	f.accept(t)
	return errc
}

func TestSession(t *testing.T) {
	f := newFakeMaster(t)
	errc := runWorker(t, f, t.TempDir())
	f.send(t, "check\n")
	expect[wire.Alive](t, f)
	f.send(t, "put file-0-x-in.txt 6 0644\nhello\n")
	f.send(t, "task 7\ncmd 32\ntr a-z A-Z < in > out; echo done"+
		"category default\ncores 1.000\nmemory 10\ndisk 10\nenv 5\nX=abc\n"+
		"infile file-0-x-in.txt in 1\noutfile file-1-y-out out 0\nend\n")
	expect[wire.AvailableResults](t, f)
	f.send(t, "send_results -1\n")
	r := expect[wire.Result](t, f)
	out, _ := f.c.ReadBody(r.Size)
	if r.TaskID != 7 || r.Status != 0 || r.Exit != 0 || string(out) != "done\n" {
		t.Fatalf("result %+v %q", r, out)
	}
	expect[wire.End](t, f)
	f.send(t, "get file-1-y-out 1\n")
	file := expect[wire.File](t, f)
	body, _ := f.c.ReadBody(file.Size)
	if file.Name != "file-1-y-out" || string(body) != "HELLO\n" {
		t.Fatalf("get: %+v %q", file, body)
	}
	expect[wire.End](t, f)
	f.send(t, "get file-9-nothing 1\n")
	if m := expect[wire.Missing](t, f); m.Name != "file-9-nothing" || m.Errno != 2 {
		t.Errorf("missing: %+v", m)
	}
	expect[wire.End](t, f)
	f.send(t, "kill 7\nunlink file-1-y-out\nrelease\n")
	if err := <-errc; err != nil {
		t.Errorf("worker after release (single shot): %v", err)
	}
}

func TestFailingAndSignalledTasks(t *testing.T) {
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	f.send(t, "task 1\ncmd 20\necho bad >&2; exit 3end\n")
	f.send(t, "task 2\ncmd 10\nkill -9 $$end\n")
	seen := map[int]wire.Result{}
	// The worker may say the second task's result is waiting while it
	// sends the first's, before their end: a master takes that as its
	// next notice, as ours does.
	notified := false
	for len(seen) < 2 {
		if !notified {
			expect[wire.AvailableResults](t, f)
		}
		notified = false
		f.send(t, "send_results -1\n")
		for {
			m, err := f.c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.(wire.End); ok {
				break
			}
			switch m := m.(type) {
			case wire.AvailableResults:
				notified = true
			case wire.Result:
				f.c.ReadBody(m.Size)
				seen[m.TaskID] = m
			}
		}
	}
	if r := seen[1]; r.Status != 0 || r.Exit != 3 {
		t.Errorf("failing task: %+v", r)
	}
	if r := seen[2]; r.Status != resultSignal || r.Exit != 9 {
		t.Errorf("killed task: %+v", r)
	}
}

// TestHostileMaster: names that would leave the workspace end the session,
// and nothing appears outside the workspace.
func TestHostileMaster(t *testing.T) {
	cases := map[string]string{
		"put dotdot":        "put ../evil 4 0644\nevil",
		"put slash":         "put a/b 4 0644\nevil",
		"put encoded":       "put %2E%2E%2Fevil 4 0644\nevil",
		"absolute infile":   "task 1\ncmd 4\ntrueinfile file-0-x /etc/evil 1\nend\n",
		"escaping outfile":  "task 1\ncmd 9\ntouch evilinfile x y 0\noutfile file-0-o ../../evil 0\nend\n",
		"dir entry dotdot":  "dir d\nput ../../evil 4 0644\nevilend\n",
		"symlink in dir":    "dir d\nsymlink evil 4\n/etcend\n",
		"get dotdot":        "get ../../etc/passwd 1\n",
		"over disk limit":   "put big 9999999999 0644\n",
		"unknown message":   "frobnicate\n",
		"deep dirs":         strings.Repeat("dir d\n", 100),
		"negative env size": "task 1\nenv -5\nend\n",
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			top := t.TempDir()
			work := filepath.Join(top, "work")
			os.Mkdir(work, 0o755)
			f := newFakeMaster(t)
			errc := runWorker(t, f, work)
			f.conn.Write([]byte(script))
			f.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, f.conn); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("worker kept the session open")
				}
			}
			<-errc
			entries, _ := os.ReadDir(top)
			if len(entries) != 1 || entries[0].Name() != "work" {
				t.Errorf("files outside the workspace: %v", entries)
			}
			if _, err := os.Stat("/etc/evil"); err == nil {
				t.Error("/etc/evil written")
			}
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	f := newFakeMaster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, Config{Masters: []string{f.addr()}, Cores: 1, MemoryMB: 10, DiskMB: 10,
			Workdir: t.TempDir(), IdleTimeout: 300 * time.Millisecond, Logger: testutil.Logger(t)})
	}()
	f.accept(t)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrIdle) {
			t.Errorf("Run = %v, want ErrIdle", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not leave when idle")
	}
}

func TestPasswordRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		wire.NewConn(conn, wire.Limits{}).AuthenticateServer([]byte("right\n"), nil)
	}()
	err = Run(context.Background(), Config{Masters: []string{ln.Addr().String()}, Cores: 1, MemoryMB: 10, DiskMB: 10,
		Workdir: t.TempDir(), SingleShot: true, Password: []byte("wrong\n"), Logger: testutil.Logger(t)})
	if !errors.Is(err, wire.ErrAuth) {
		t.Errorf("single-shot worker with a wrong password: %v, want wire.ErrAuth", err)
	}
}
