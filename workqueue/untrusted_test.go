package workqueue

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// liar is a fake worker on a real socket: it announces 1000 cores and
// never runs or answers anything. It reports the IDs of the tasks it is
// sent on tasks and of the kills on kills.
type liar struct {
	addr         string // as the master sees it
	tasks, kills chan int
}

func startLiar(t *testing.T, m *Master) *liar {
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := wire.NewConn(conn, wire.Limits{})
	c.Send(wire.Hello{Protocol: 9, Host: "liar", OS: "Linux", Arch: "x86_64", Version: "1"})
	for _, r := range []wire.Resource{
		{Name: "cores", Total: 1000, Smallest: 1000, Largest: 1000},
		{Name: "memory", Total: 1 << 20, Smallest: 1 << 20, Largest: 1 << 20},
		{Name: "disk", Total: 1 << 30, Smallest: 1 << 30, Largest: 1 << 30},
		{Name: "tag"},
	} {
		c.Send(r)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	l := &liar{addr: conn.LocalAddr().String(), tasks: make(chan int, 100), kills: make(chan int, 100)}
	go func() {
		for {
			msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			switch m := msg.(type) {
			case wire.Task:
				if _, err := c.ReadTask(m.ID); err != nil {
					return
				}
				l.tasks <- m.ID
			case wire.Kill:
				l.kills <- m.ID
			}
		}
	}()
	return l
}

// TestLyingWorker: a worker that announces 1000 cores and never runs
// anything is given a few tasks, not the whole queue, and an honest worker
// runs every task, the liar's too, while the liar stays connected (the
// keepalive, an hour here, never comes into it). Every output is the one
// its task wrote.
func TestLyingWorker(t *testing.T) {
	m := startMaster(t, Config{KeepaliveInterval: time.Hour})
	dir := t.TempDir()
	const n = 20
	for i := 0; i < n; i++ {
		task := &Task{Command: fmt.Sprintf("echo %d > out", i), Tag: fmt.Sprint(i)}
		task.AddOutput(filepath.Join(dir, fmt.Sprint("out", i)), "out", false)
		if _, err := m.Submit(task); err != nil {
			t.Fatal(err)
		}
	}
	l := startLiar(t, m)
	held := map[int]bool{}
	for len(held) < 4 { // SlowStart's default
		held[<-l.tasks] = true
	}
	startWorker(t, m, worker.Config{Cores: 2})
	got := waitAll(t, m, n)
	for i := 0; i < n; i++ {
		r := got[fmt.Sprint(i)]
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("out", i)))
		if !r.OK() || err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(i) {
			t.Errorf("task %d: %v %v, output %q %v", i, r.Status, r.Err, b, err)
		}
		if r.Worker == l.addr {
			t.Errorf("task %d: result from %q", i, r.Worker)
		}
	}
	// The liar's attempts were aborted when their copies won.
	for len(held) > 0 {
		select {
		case id := <-l.tasks:
			t.Errorf("the liar was given another task (wire ID %d)", id)
		case id := <-l.kills:
			delete(held, id)
		}
	}
	st := m.Stats()
	if st.SpeculativeCopies != 4 || st.WorkersConnected != 2 {
		t.Errorf("%d copies, %d workers connected; want 4 and 2", st.SpeculativeCopies, st.WorkersConnected)
	}
}

// TestForgedPoolName: a worker's pool name ("info from-factory") counts in
// workers_by_pool only when it is a plain name; one that would forge other
// pools' counts is ignored and the worker counted as unmanaged.
func TestForgedPoolName(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{Cores: 1, Pool: "honest"})
	startWorker(t, m, worker.Config{Cores: 1, Pool: "honest:50,other"})
	testutil.WaitFor(t, "the workers to connect", 30*time.Second, func() bool { return m.Stats().WorkersConnected == 2 })
	reply := make(chan []byte, 1)
	m.send(evStatus{kind: "catalog", reply: reply})
	if got := decodeRecord(<-reply)["workers_by_pool"]; got != "honest:1,unmanaged:1" {
		t.Errorf("workers_by_pool %q, want honest:1,unmanaged:1", got)
	}
}
