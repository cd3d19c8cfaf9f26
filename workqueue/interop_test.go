package workqueue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// startCCToolsWorker runs Debian's work_queue_worker against m until the
// test ends.
func startCCToolsWorker(t *testing.T, m *Master, extra ...string) {
	t.Helper()
	bin := testutil.NeedCCTools(t, "work_queue_worker")
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"--cores", "2", "--memory", "1000", "--disk", "1000", "-t", "60", "-s", t.TempDir()}, extra...)
	args = append(args, "127.0.0.1", fmt.Sprint(m.Port()))
	cmd := exec.CommandContext(ctx, bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("work_queue_worker output:\n%s", out.String())
		}
	})
}

func TestMasterWithCCToolsWorker(t *testing.T) {
	m := startMaster(t, Config{})
	startCCToolsWorker(t, m)
	exercise(t, m, t.TempDir())
}

// TestCCToolsWorkerReusesCachedInputs checks that a cached input goes to
// a CCTools worker once, however many tasks read it.
func TestCCToolsWorkerReusesCachedInputs(t *testing.T) {
	m := startMaster(t, Config{})
	startCCToolsWorker(t, m)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.dat")
	os.WriteFile(big, make([]byte, 1<<20), 0o644)
	for i := 0; i < 10; i++ {
		task := &Task{Command: "wc -c < big.dat", Tag: fmt.Sprint(i)}
		task.AddInput(big, "", true)
		m.Submit(task)
	}
	got := waitAll(t, m, 10)
	for tag, r := range got {
		if !r.OK() || strings.TrimSpace(string(r.Output)) != "1048576" {
			t.Errorf("task %s: %v %d %q", tag, r.Status, r.ExitCode, r.Output)
		}
	}
	if sent := m.Stats().BytesSent; sent < 1<<20 || sent >= 2<<20 {
		t.Errorf("sent %d bytes for 10 tasks sharing a cached 1 MiB input; want it sent once", sent)
	}
}

// TestPasswordWithCCToolsWorker: work_queue_worker --password gets in with
// the right password (the master answering only after it), and with a
// wrong one is refused, the master saying so with its address.
func TestPasswordWithCCToolsWorker(t *testing.T) {
	for _, tc := range []struct{ name, password string }{
		{"right password", "s3cret\n"},
		{"wrong password", "guess\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pw := filepath.Join(t.TempDir(), "pw")
			os.WriteFile(pw, []byte(tc.password), 0o600)
			seen := make(notices, 10)
			m := startMaster(t, Config{Password: []byte("s3cret\n"), Notices: slog.New(seen)})
			startCCToolsWorker(t, m, "--password", pw)
			if tc.password != "s3cret\n" {
				if n := seen.next(t); !strings.Contains(n, "wrong or missing password") || !strings.Contains(n, "from=127.0.0.1:") {
					t.Errorf("notice %q, want a wrong password from 127.0.0.1", n)
				}
				if st := m.Stats(); st.WorkersJoined != 0 {
					t.Errorf("%d workers joined", st.WorkersJoined)
				}
				return
			}
			m.Submit(&Task{Command: "echo authenticated", Tag: "a"})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := m.Wait(ctx)
			if err != nil || strings.TrimSpace(string(r.Output)) != "authenticated" {
				t.Fatalf("task behind a password: %v %+v", err, r)
			}
		})
	}
}
