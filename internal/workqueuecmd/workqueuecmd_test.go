package workqueuecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/workqueue"
)

func run(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(ctx, args, cmdutil.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{"worker"},
		{"worker", "-M", "p", "host", "9123"},
		{"worker", "host", "port"},
		{"worker", "hostwithoutport"},
		{"worker", "127.0.0.1:notaport"},
		{"worker", "h:1,h:70000"},
		{"worker", "--cores", "-1", "h", "1"},
		{"worker", "-t", "soon", "h", "1"},
		{"worker", "--foreman-port", "9200", "h", "1"},
		{"worker", "--foreman", "--foreman-port", "9300:9200", "h", "1"},
		{"worker", "--foreman", "--foreman-port", "x", "h", "1"},
		{"status", "onlyhost"},
		{"status", "-W"},
		{"status", "h", "99999"},
		{"catalog", "-p", "70000"},
		{"catalog", "extra"},
		{"factory", "-T", "local", "--decision", "D9", "h", "1"},
		{"factory", "-T", "local", "--max-change", "0", "h", "1"},
		{"factory", "-T", "local", "--decision", "D7", "h", "1"},
		{"pool"},
		{"pool", "-T", "local"},
		{"pool", "-T", "wq", "--policy", "p.conf"},
		{"pool", "-T", "local", "--policy", "p.conf", "extra"},
		{"pool", "-T", "local", "--policy", "p.conf", "--shapes", "4x"},
		{"nonsense"},
	}
	for _, args := range cases {
		if code, _, stderr := run(context.Background(), args...); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d (usage)\n%s", args, code, cmdutil.ExitUsage, stderr)
		}
	}
}

// TestUnknownCommand: a command that is not one names them all, or the
// one it is a typo of.
func TestUnknownCommand(t *testing.T) {
	tests := []struct{ arg, want string }{
		{"nonsense", `workqueue: unknown command "nonsense" (the commands are catalog, factory, pool, sim, status, worker)`},
		{"wroker", `workqueue: unknown command "wroker" (did you mean worker?)`},
		{"pol", `workqueue: unknown command "pol" (did you mean pool?)`},
	}
	for _, tt := range tests {
		if code, _, stderr := run(context.Background(), tt.arg); code != cmdutil.ExitUsage || !strings.Contains(stderr, tt.want+"\n") {
			t.Errorf("workqueue %s: exit %d, stderr %q; want %q", tt.arg, code, stderr, tt.want)
		}
	}
}

// TestPoolBadPolicy: a bad policy file is an error naming its file and
// line, before anything is submitted.
func TestPoolBadPolicy(t *testing.T) {
	f := filepath.Join(t.TempDir(), "pool.conf")
	if err := os.WriteFile(f, []byte("max_workers: 4\ndistribution: a=many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(context.Background(), "pool", "-T", "local", "--policy", f, "-C", "127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, f+`:2: distribution: entry "a=many"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestWorkerWarnsAboutOpenPasswordFile: as ssh does with a private key.
func TestWorkerWarnsAboutOpenPasswordFile(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("sesame\n"), 0o644)
	_, _, stderr := run(context.Background(), "worker", "--password", pw, "-t", "0.01", "127.0.0.1", "1")
	if !strings.Contains(stderr, "password file "+pw+" can be read by others (permissions 0644)") {
		t.Errorf("no warning about the password file:\n%s", stderr)
	}
	os.Chmod(pw, 0o600)
	if _, _, stderr := run(context.Background(), "worker", "--password", pw, "-t", "0.01", "127.0.0.1", "1"); strings.Contains(stderr, "can be read by others") {
		t.Errorf("warning about a private password file:\n%s", stderr)
	}
}

// TestCatalogAndStatus runs `workqueue catalog`, a master advertising to it
// with a `workqueue worker` found by project name, and `workqueue status`
// in its three forms.
func TestCatalogAndStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	portFile := filepath.Join(t.TempDir(), "port")
	catDone := make(chan int, 1)
	go func() {
		code, _, _ := run(ctx, "catalog", "-p", "0", "-Z", portFile, "-q")
		catDone <- code
	}()
	var catPort string
	for deadline := time.Now().Add(10 * time.Second); catPort == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("catalog never wrote its port")
		}
		b, _ := os.ReadFile(portFile)
		catPort = strings.TrimSpace(string(b))
	}
	cat := "127.0.0.1:" + catPort
	project := "st" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	workerDone := make(chan int, 1)
	go func() {
		code, _, _ := run(ctx, "worker", "-M", project, "-C", cat, "--cores", "1", "-s", t.TempDir(), "-q", "-t", "30")
		workerDone <- code
	}()
	m.Submit(&workqueue.Task{Command: "sleep 30", Tag: "long"})
	for deadline := time.Now().Add(20 * time.Second); m.Stats().TasksRunning < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker never ran the task")
		}
	}
	time.Sleep(300 * time.Millisecond) // an advertisement after the task started
	port := strconv.Itoa(m.Port())
	checks := []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-C", cat}, []string{"PROJECT", project, port}},
		{[]string{"status", "-C", cat, "-M", "nomatch"}, []string{"PROJECT"}},
		{[]string{"status", "127.0.0.1", port}, []string{"WAITING", project}},
		{[]string{"status", "-W", "127.0.0.1", port}, []string{"ADDRESS", "127.0.0.1:"}},
		{[]string{"status", "-T", "127.0.0.1", port}, []string{"running", "sleep 30"}},
		{[]string{"status", "-l", "127.0.0.1", port}, []string{`"type": "wq_master"`}},
	}
	for _, c := range checks {
		code, out, stderr := run(context.Background(), c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	if code, out, _ := run(context.Background(), "status", "-C", cat, "-M", "nomatch"); strings.Contains(out, project) || code != 0 {
		t.Errorf("-M filter: %d %s", code, out)
	}
	if code, _, stderr := run(context.Background(), "status", "-t", "2", "127.0.0.1", "1"); code != cmdutil.ExitFailure {
		t.Errorf("status of a master that is not there: exit %d: %s", code, stderr)
	}
	cancel()
	if code := <-catDone; code != 0 && code != cmdutil.ExitInterrupted {
		t.Errorf("catalog exit %d", code)
	}
	if code := <-workerDone; code != 0 && code != cmdutil.ExitInterrupted {
		t.Errorf("worker exit %d", code)
	}
}
