package workqueuecmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// TestFactoryTLS: a factory given --ssl-ca and --password asks a TLS
// master for its queue, and its workers (given --ssl-ca too) serve it.
func TestFactoryTLS(t *testing.T) {
	cert, key := testutil.SelfSignedCert(t, "master")
	server, err := wire.ServerTLS(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("sesame\n"), 0o600)
	bin := t.TempDir()
	if err := testutil.BuildCommands(bin, "workqueue"); err != nil {
		t.Fatal(err)
	}
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", TLS: server, Password: []byte("sesame\n"), Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Submit(&workqueue.Task{Command: "echo over TLS"})
	cmd := exec.Command(filepath.Join(bin, "workqueue"), "factory", "-T", "local", "--min", "0", "--max", "1",
		"--cores", "1", "--memory", "100", "--disk", "100", "-t", "60", "--interval", "0.1", "--ssl-ca", cert, "--password", pw,
		"-E", "-s "+t.TempDir()+" -i 0.05", "127.0.0.1", strconv.Itoa(m.Port()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := m.Wait(ctx)
	if err != nil || strings.TrimSpace(string(r.Output)) != "over TLS" {
		t.Fatalf("task: %v %+v\nstdout:\n%s\nstderr:\n%s", err, r, &stdout, &stderr)
	}
	// With --min 0, the worker was started because the factory read the
	// master's queue over TLS.
	if strings.Contains(stderr.String(), "cannot learn what the masters need") {
		t.Errorf("the factory could not ask the master:\n%s", &stderr)
	}
}
