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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// floodEnv, set to a number of file descriptors, makes the test binary run
// floodMaster instead of the tests.
const floodEnv = "RIGHTSIZE_FLOOD_MASTER_NOFILE"

// floodMaster is the master of TestConnectionFlood: a process allowed few
// file descriptors that takes commands on standard input:
//
//	run N      run N tasks, each with an input and an output file, and
//	           print "ran N failed F"
//	workers N  print "workers N" once N workers are connected
func floodMaster(nofile string) int {
	n, err := strconv.ParseUint(nofile, 10, 64)
	if err == nil {
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood master:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// A token for each worker that joins, for "workers N" to wait on.
	joined := make(chan struct{}, 64)
	// The flood's 150 connections wait their turn a dozen at a time, each
	// holding its slot for the handshake timeout: 300 ms lets the second
	// worker in after about two seconds (a timeout of one second took eight).
	m, err := Listen(Config{Addr: "127.0.0.1:0", HandshakeTimeout: 300 * time.Millisecond, Logger: log,
		Joined: func(WorkerInfo) {
			select {
			case joined <- struct{}{}:
			default: // tokens enough to wake the waiter are pending
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood master:", err)
		return 1
	}
	defer m.Close()
	dir, err := os.MkdirTemp("", "flood-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood master:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	fmt.Printf("port %d\n", m.Port())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		k, _ := strconv.Atoi(arg)
		switch cmd {
		case "run":
			for i := range k {
				in := filepath.Join(dir, fmt.Sprintf("in%d", i))
				os.WriteFile(in, []byte(strconv.Itoa(i)), 0o644)
				t := &Task{Command: "cat in > out", Tag: strconv.Itoa(i)}
				t.AddInput(in, "in", false)
				t.AddOutput(filepath.Join(dir, fmt.Sprintf("out%d", i)), "out", false)
				if _, err := m.Submit(t); err != nil {
					fmt.Fprintln(os.Stderr, "flood master:", err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			failed := 0
			for range k {
				r, err := m.Wait(ctx)
				if err != nil {
					fmt.Fprintln(os.Stderr, "flood master:", err)
					failed = k
					break
				}
				out, _ := os.ReadFile(filepath.Join(dir, "out"+r.Tag))
				if !r.OK() || string(out) != r.Tag {
					fmt.Fprintf(os.Stderr, "flood master: task %s: %v %v, output %q\n", r.Tag, r.Status, r.Err, out)
					failed++
				}
			}
			cancel()
			fmt.Printf("ran %d failed %d\n", k, failed)
		case "workers":
			// Joined is called from the master's loop, which answers
			// Stats after it.
			for m.Stats().WorkersConnected < k {
				<-joined
			}
			fmt.Printf("workers %d\n", k)
		}
	}
	return 0
}

// TestConnectionFlood: a master allowed 100 file descriptors, with a worker
// connected, is flooded with 150 connections that never say anything, from
// 30 addresses. Every task still gets its files (the master keeps
// descriptors for them), a second worker still gets in once the flood's
// connections time out, and the master says on its log that it is full.
func TestConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a master process")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floodEnv+"=100")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("master's log:\n%s", stderr.String())
		}
	})
	lines := bufio.NewScanner(stdout)
	ask := func(command string) string {
		t.Helper()
		io.WriteString(stdin, command+"\n")
		if !lines.Scan() {
			t.Fatalf("master exited after %q", command)
		}
		return lines.Text()
	}
	if !lines.Scan() {
		t.Fatal("master did not start")
	}
	addr := "127.0.0.1:" + strings.TrimPrefix(lines.Text(), "port ")

	runWorker := func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			worker.Run(ctx, worker.Config{Masters: []string{addr}, Cores: 2, MemoryMB: 100, DiskMB: 100,
				Workdir: t.TempDir(), MinBackoff: 50 * time.Millisecond, Logger: testutil.Logger(t)})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	runWorker()
	if got := ask("workers 1"); got != "workers 1" {
		t.Fatalf("master said %q", got)
	}

	for host := 2; host < 32; host++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}}
		for range 5 {
			conn, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("flooding from 127.0.0.%d: %v", host, err)
			}
			t.Cleanup(func() { conn.Close() })
		}
	}

	if got := ask("run 40"); got != "ran 40 failed 0" {
		t.Errorf("during the flood: %s", got)
	}
	runWorker()
	if got := ask("workers 2"); got != "workers 2" {
		t.Errorf("master said %q", got)
	}
	if log := stderr.String(); !strings.Contains(log, "connection limit reached") {
		t.Errorf("the master's log does not say it was full:\n%s", log)
	}
}
