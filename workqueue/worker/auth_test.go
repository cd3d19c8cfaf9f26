package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// rogueMaster listens like a master that does not know the password and
// plays the exchange by hand.
type rogueMaster struct {
	t  *testing.T
	ln net.Listener
}

func newRogueMaster(t *testing.T) *rogueMaster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &rogueMaster{t: t, ln: ln}
}

func (r *rogueMaster) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// rogueConn is one connection from the worker to the rogue master.
type rogueConn struct {
	conn net.Conn
	r    *bufio.Reader
	got  []string
}

func (r *rogueMaster) accept() *rogueConn {
	r.t.Helper()
	conn, err := r.ln.Accept()
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &rogueConn{conn: conn, r: bufio.NewReader(conn)}
}

func (c *rogueConn) send(lines ...string) { io.WriteString(c.conn, strings.Join(lines, "\n")+"\n") }

// line reads a line, or returns "" when the worker hung up or said nothing.
func (c *rogueConn) line() string {
	l, err := c.r.ReadString('\n')
	if err != nil {
		return ""
	}
	l = strings.TrimSuffix(l, "\n")
	c.got = append(c.got, l)
	return l
}

// challenge announces the exchange, reads the worker's announcement and
// returns its challenge.
func (c *rogueConn) challenge(t *testing.T) string {
	t.Helper()
	c.send("auth password sha1")
	if l := c.line(); l != "auth password sha1" {
		t.Fatalf("worker announced %q", l)
	}
	y := c.line()
	if y == "" {
		t.Fatal("the worker sent no challenge")
	}
	return y
}

// reflect sends the worker's challenge y back as the rogue's own and, if
// the worker answers it, uses that answer as the rogue's, as an attacker
// would; then it reads what the worker says next.
func (c *rogueConn) reflect(y string) {
	c.send(y)
	if stolen := c.line(); stolen != "" {
		c.send(stolen, "ok")
		for c.line() != "" {
		}
	}
}

var sha1Hex = regexp.MustCompile(`^[0-9a-f]{40}$`)

// checkRefused fails the test if the worker answered a challenge of its own
// or said hello to the rogue master.
func (c *rogueConn) checkRefused(t *testing.T) {
	t.Helper()
	for _, l := range c.got {
		if sha1Hex.MatchString(l) || strings.HasPrefix(l, "workqueue ") {
			t.Errorf("the worker sent %q to a master without the password (all it sent: %q)", l, c.got)
		}
	}
}

func runPasswordWorker(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Password = []byte("s3cret\n")
	cfg.Cores, cfg.MemoryMB, cfg.DiskMB = 1, 100, 100
	cfg.Workdir = t.TempDir()
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	cfg.Logger = testutil.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, cfg) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestWorkerRefusesReflection: a master without the password sends the
// worker's own challenge back, on the same connection or on a later one,
// to have the worker compute the answer the master owes. The worker must
// not answer it, nor say hello.
func TestWorkerRefusesReflection(t *testing.T) {
	t.Run("same connection", func(t *testing.T) {
		rogue := newRogueMaster(t)
		runPasswordWorker(t, Config{Masters: []string{rogue.ln.Addr().String()}})
		c := rogue.accept()
		c.reflect(c.challenge(t))
		c.checkRefused(t)
	})
	t.Run("later connection", func(t *testing.T) {
		rogue := newRogueMaster(t)
		runPasswordWorker(t, Config{Masters: []string{rogue.ln.Addr().String()}})
		first := rogue.accept()
		y := first.challenge(t)
		first.conn.Close()
		c := rogue.accept()
		c.challenge(t)
		c.reflect(y)
		c.checkRefused(t)
	})
}

// TestWorkerFoundThroughCatalogAuthenticates: a rogue master announced
// under the project's name in the catalog is still asked for the password,
// and refused when it reflects.
func TestWorkerFoundThroughCatalogAuthenticates(t *testing.T) {
	srv, err := catalog.Listen(catalog.ServerConfig{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
	cat := "127.0.0.1:" + strconv.Itoa(srv.Port())

	rogue := newRogueMaster(t)
	rec := catalog.Record{"type": "wq_master", "project": "victim", "port": rogue.port()}
	if err := catalog.Send(ctx, cat, "tcp", rec); err != nil {
		t.Fatal(err)
	}
	// The TCP update is stored after Send returns.
	testutil.WaitFor(t, "the catalog to list the rogue master", 10*time.Second, func() bool { return len(catalog.Masters(srv.Records())) > 0 })
	runPasswordWorker(t, Config{Project: "victim", Catalogs: []string{cat}})
	c := rogue.accept()
	c.reflect(c.challenge(t))
	c.checkRefused(t)
}

// TestPasswordWithCCToolsMakeflow: this worker authenticates to CCTools'
// makeflow -T wq --password with the right password, and is refused with
// a wrong one.
func TestPasswordWithCCToolsMakeflow(t *testing.T) {
	makeflow := testutil.NeedCCTools(t, "makeflow")
	for _, tc := range []struct {
		name     string
		password string
		wantOK   bool
	}{
		{"right password", "s3cret\n", true},
		{"wrong password", "guess\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o600)
			os.WriteFile(filepath.Join(dir, "wf.mf"), []byte("out.txt:\n\techo authenticated > out.txt\n"), 0o644)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, makeflow, "-T", "wq", "-p", "0", "--password", "pw", "wf.mf")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			stdout, _ := cmd.StdoutPipe()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); cmd.Wait() }()
			port := waitForPort(t, stdout)
			err := Run(ctx, Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(port)}, Cores: 1, MemoryMB: 100, DiskMB: 100,
				Workdir: t.TempDir(), SingleShot: true, Password: []byte(tc.password), Logger: testutil.Logger(t)})
			if !tc.wantOK {
				if !errors.Is(err, wire.ErrAuth) {
					t.Errorf("worker with a wrong password: %v, want wire.ErrAuth", err)
				}
				return
			}
			if err != nil {
				t.Errorf("worker: %v", err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("makeflow: %v\n%s", err, stderr.String())
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "authenticated\n" {
				t.Errorf("out.txt = %q", b)
			}
		})
	}
}
