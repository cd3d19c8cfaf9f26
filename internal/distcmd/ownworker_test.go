package distcmd

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/worker"
)

func TestOwnWorkerJoined(t *testing.T) {
	here := func(ip net.IP) bool { return ip.IsLoopback() || ip.Equal(net.ParseIP("10.1.2.3")) }
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }
	for _, tc := range []struct {
		name  string
		info  workqueue.WorkerInfo
		yield bool
	}{
		{"itself", workqueue.WorkerInfo{Addr: tcp("127.0.0.1"), Features: []string{"x", "own"}}, false},
		{"another machine", workqueue.WorkerInfo{Addr: tcp("192.0.2.7")}, false},
		{"loopback", workqueue.WorkerInfo{Addr: tcp("127.0.0.1"), Features: []string{"x"}}, true},
		{"IPv6 loopback", workqueue.WorkerInfo{Addr: tcp("::1")}, true},
		{"this machine's interface", workqueue.WorkerInfo{Addr: tcp("10.1.2.3")}, true},
		{"not TCP", workqueue.WorkerInfo{Addr: &net.UnixAddr{Name: "/tmp/s"}}, false},
	} {
		w := &OwnWorker{feature: "own", local: make(chan struct{}), here: here}
		w.joined(tc.info)
		w.joined(tc.info) // twice must not close twice
		select {
		case <-w.local:
			if !tc.yield {
				t.Errorf("%s: yields", tc.name)
			}
		default:
			if tc.yield {
				t.Errorf("%s: does not yield", tc.name)
			}
		}
	}
}

// lineWriter collects what is written and signals each write.
type lineWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits up to a minute for s to be written.
func (w *lineWriter) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		got := w.b.String()
		w.mu.Unlock()
		if strings.Contains(got, s) {
			return
		}
		select {
		case <-w.wrote:
		case <-deadline:
			t.Fatalf("no %q in a minute:\n%s", s, got)
		}
	}
}

// TestOwnWorkerYields: a real master with this machine's worker, which
// takes no more tasks once another worker joins from this machine.
func TestOwnWorkerYields(t *testing.T) {
	joins := make(chan workqueue.WorkerInfo, 4)
	cfg := workqueue.Config{Addr: "127.0.0.1:0", Logger: testutil.Logger(t), Joined: func(w workqueue.WorkerInfo) { joins <- w }}
	msgs := &lineWriter{wrote: make(chan struct{}, 1)}
	own := NewOwnWorker(&cfg, "test", msgs, testutil.Logger(t))
	m, err := workqueue.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	stop, err := own.Start(m.Port(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	msgs.waitFor(t, "this machine's")
	if w := <-joins; len(w.Features) != 1 || w.Features[0] != own.feature {
		t.Fatalf("first to join is not this machine's worker: %+v", w)
	}
	other := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.Run(ctx, worker.Config{Masters: []string{fmt.Sprintf("127.0.0.1:%d", m.Port())}, Cores: 1, Workdir: other, Logger: testutil.Logger(t)})
	}()
	defer func() { cancel(); <-done }()
	msgs.waitFor(t, "a worker joined from this machine")
	for deadline := time.Now().Add(time.Minute); m.Stats().CoresTotal != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("this machine's worker still offers its cores: %+v", m.Stats())
		}
		runtime.Gosched()
	}
	// Tasks go to the other worker.
	for i := range 3 {
		if _, err := m.Submit(&workqueue.Task{Command: "pwd"}); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
		r, err := m.Wait(wctx)
		wcancel()
		if err != nil || !strings.HasPrefix(string(r.Output), other) {
			t.Fatalf("task %d: %+v, %v; want it run in %s", i, r, err, other)
		}
	}
}
