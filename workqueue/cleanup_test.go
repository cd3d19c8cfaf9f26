package workqueue

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// cleanupLog is what a recording worker was sent: the tasks, and the kill
// and unlink messages that clean up after them.
type cleanupLog struct {
	mu       sync.Mutex
	tasks    []int
	outputs  []string // the tasks' outputs' cache names
	killed   []int
	unlinked []string
}

// cleanedUp reports whether every task was killed and every output
// unlinked.
func (l *cleanupLog) cleanedUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.tasks {
		if !slices.Contains(l.killed, id) {
			return false
		}
	}
	for _, name := range l.outputs {
		if !slices.Contains(l.unlinked, name) {
			return false
		}
	}
	return true
}

// recordingWorker connects to m as a one-core worker that runs every task
// at once, answers every get with a one-byte file, and records what it is
// sent into log, until the connection closes.
func recordingWorker(t *testing.T, m *Master, log *cleanupLog) {
	conn, c, send := connectAsWorker(t, m, "recorder")
	if conn == nil {
		return
	}
	defer conn.Close()
	var done []int
	for {
		msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		log.mu.Lock()
		switch msg := msg.(type) {
		case wire.Task:
			spec, err := c.ReadTask(msg.ID)
			if err != nil {
				log.mu.Unlock()
				t.Errorf("recording worker: %v", err)
				return
			}
			log.tasks = append(log.tasks, msg.ID)
			for _, o := range spec.Outputs {
				log.outputs = append(log.outputs, o.CacheName)
			}
			done = append(done, msg.ID)
			send("available_results\n")
		case wire.SendResults:
			for _, id := range done {
				send(fmt.Sprintf("result 0 0 0 1000 %d\n", id))
			}
			done = nil
			send("end\n")
		case wire.Get:
			send(fmt.Sprintf("file %s 1\nxend\n", msg.Name))
		case wire.Kill:
			log.killed = append(log.killed, msg.ID)
		case wire.Unlink:
			log.unlinked = append(log.unlinked, msg.Name)
		case wire.Check:
			send("alive\n")
		}
		log.mu.Unlock()
	}
}

// TestFetchCleanupReachesWorker: the kill and unlink that follow a fetch are
// held to leave with the worker's next message, and still reach the worker
// when no message follows (the last task): the loop's tick sends them.
func TestFetchCleanupReachesWorker(t *testing.T) {
	for _, tasks := range []int{1, 3} {
		t.Run(fmt.Sprint(tasks, " tasks"), func(t *testing.T) {
			m := startMaster(t, Config{})
			log := &cleanupLog{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				recordingWorker(t, m, log)
			}()
			defer func() { m.Close(); <-done }()
			dir := t.TempDir()
			for i := range tasks {
				out := File{Local: filepath.Join(dir, fmt.Sprint("out.", i))}
				if _, err := m.Submit(&Task{Command: "true", Outputs: []File{out}}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range tasks {
				if r, err := m.Wait(ctx); err != nil || !r.OK() {
					t.Fatalf("task: %+v, %v", r, err)
				}
			}
			testutil.WaitFor(t, "every task killed and every output unlinked on the worker", 10*time.Second, log.cleanedUp)
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.tasks) != tasks || len(log.outputs) != tasks {
				t.Errorf("worker sent %d tasks with %d outputs, want %d", len(log.tasks), len(log.outputs), tasks)
			}
		})
	}
}
