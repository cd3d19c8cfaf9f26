package worker

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// TestDrainAfterHelloBeforeWatch: a worker told to drain after its hello
// offered its cores, but before its session's watch first looks at
// Config.Drain, still tells the master it has no room left. (The watch
// took the drain for one the hello had reported, and the master kept
// counting the worker's cores: TestWorkerDrain under load.)
func TestDrainAfterHelloBeforeWatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	drain := make(chan struct{})
	helloRead := make(chan struct{})
	wsDir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer wsDir.Close()
	cfg := Config{Masters: []string{ln.Addr().String()}, Cores: 2, MemoryMB: 100, DiskMB: 1, Drain: drain, Logger: testutil.Logger(t)}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cfg: cfg, started: time.Now(), log: cfg.Logger, res: resources{cores: 2, memoryMB: 100, diskMB: 1}, workspace: wsDir, id: "worker-test",
		testHookWatch: func() {
			<-helloRead // the hello offered the worker's cores
			close(drain)
		}}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- w.session(ctx, conn) }()
	defer func() { cancel(); <-ended }()

	mc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	mc.SetDeadline(time.Now().Add(20 * time.Second))
	c := wire.NewConn(mc, wire.Limits{})
	cores := -1.0
	for {
		m, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("reading the worker's hello: %v", err)
		}
		if r, ok := m.(wire.Resource); ok && r.Name == "cores" {
			cores = r.Total
		}
		if i, ok := m.(wire.Info); ok && i.Key == "worker-end-time" {
			break
		}
	}
	if cores != 2 {
		t.Fatalf("the hello offered %v cores, want 2", cores)
	}
	close(helloRead)
	for {
		m, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("the worker did not report its drain: %v", err)
		}
		if r, ok := m.(wire.Resource); ok && r.Name == "cores" {
			if r.Total != 0 {
				t.Fatalf("after the drain the worker offers %v cores, want 0", r.Total)
			}
			return
		}
	}
}
