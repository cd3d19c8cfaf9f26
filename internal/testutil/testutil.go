// Package testutil holds helpers shared by rightsize's tests: finding the real
// components a test needs (CCTools, SLURM, gcc, Chromium), building the
// project's commands for end-to-end runs (with RIGHTSIZE_CLUSTER=none, so
// that placement stays here unless a test names a cluster, and a cache and
// configuration of their own), starting a catalog server (StartCatalog),
// and watching a run's status page (statuspage.go: a function whose calls
// wait until released, the page's address, loading it in headless
// Chromium with LoadPage), and waiting for state another process changes
// (WaitFor, WaitLine).
//
// Outside CI a test whose component is missing is skipped with a message that
// says how to install it; under CI=true it fails, because CI installs every
// component through scripts/deps.sh.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// InCI reports whether the tests run under CI (CI=true), where every real
// component must be present.
func InCI() bool { return os.Getenv("CI") == "true" }

// NeedCommand returns the path of the named program, skipping the test when it
// is missing outside CI and failing it under CI. hint says how to install it.
func NeedCommand(t testing.TB, name, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if InCI() {
		t.Fatalf("%s not found under CI=true (scripts/deps.sh should have installed it): %v", name, err)
	}
	t.Skipf("skipping: %s not found (%s)", name, hint)
	return ""
}

// batchSystemUp asks scripts/KIND.sh status once per test binary whether
// that batch system takes jobs here: one that is down makes its commands
// retry for seconds.
var batchSystemUp = map[string]func() error{
	"slurm": sync.OnceValue(func() error { return scriptStatus("slurm") }),
	"sge":   sync.OnceValue(func() error { return scriptStatus("sge") }),
}

func scriptStatus(kind string) error {
	out, err := exec.Command(filepath.Join(ModuleRoot(), "scripts", kind+".sh"), "status").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

// NeedBatchSystem skips the test unless the single-node batch system kind
// ("slurm" or "sge", as scripts/KIND.sh starts it) takes jobs here, and
// fails it under CI=true, where .ci/run starts both.
func NeedBatchSystem(t testing.TB, kind string) {
	t.Helper()
	up, ok := batchSystemUp[kind]
	if !ok {
		t.Fatalf("NeedBatchSystem: no batch system %q", kind)
	}
	if err := up(); err != nil {
		if InCI() {
			t.Fatalf("%s is not up under CI=true (.ci/run starts it with scripts/%s.sh start): %v", kind, kind, err)
		}
		t.Skipf("skipping: %s is not up here (start it with scripts/%s.sh start): %v", kind, kind, err)
	}
}

// NeedCCTools is NeedCommand for a program of Debian's CCTools
// (coop-computing-tools): it skips any program of that name in this
// project's own bin directory, where rightsize's makeflow lives.
func NeedCCTools(t testing.TB, name string) string {
	t.Helper()
	ours := filepath.Join(ModuleRoot(), "bin")
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || filepath.Clean(dir) == ours {
			continue
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return path
		}
	}
	if InCI() {
		t.Fatalf("CCTools %s not found under CI=true (scripts/deps.sh should have installed it)", name)
	}
	t.Skipf("skipping: CCTools %s not found (apt-get install coop-computing-tools openmpi-bin)", name)
	return ""
}

// ModuleRoot returns the directory holding go.mod.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// BuildCommands builds ./cmd/NAME for each name into dir, so that end-to-end
// tests run the real binaries, built as the Makefile builds them (the
// workqueue command without cgo: see the Makefile). Call it once from
// TestMain.
func BuildCommands(dir string, names ...string) error {
	for _, name := range names {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = ModuleRoot()
		if name == "workqueue" {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	}
	return nil
}

// Logger returns a logger that writes every record, debug ones included,
// to the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// SyncBuffer is a bytes.Buffer that is safe for concurrent writers, such
// as a command's stdout and stderr or several workers' logs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// RunWithCommands is the body of a TestMain for tests that run the real
// commands: it builds the named commands of cmd/ into a temporary
// directory, passes that directory to setup, runs the tests with
// RIGHTSIZE_CLUSTER=none (so that automatic placement stays here unless a
// test names a cluster) and with XDG_CACHE_HOME and XDG_CONFIG_HOME in that
// directory (so that what the commands learn and keep, and the user's own
// cluster file, stay out of the tests and the tests out of the user's
// files), removes the directory and returns the exit code for os.Exit.
func RunWithCommands(m *testing.M, setup func(dir string), names ...string) int {
	dir, err := os.MkdirTemp("", "rightsize-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := BuildCommands(dir, names...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The commands place work automatically on the cluster they find:
	// tests run here, whatever this machine has (a SLURM started for the
	// batch tests), unless they name one themselves.
	os.Setenv("RIGHTSIZE_CLUSTER", "none")
	if os.Getenv("GOCACHE") == "" {
		// The go command, which some tests run, keeps its build cache
		// there too: keep it where it was.
		if c, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(c, "go-build"))
		}
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	setup(dir)
	return m.Run()
}

// FakeCondor installs the fake HTCondor of batch's tests in a
// new directory and returns it: that package's test binary, linked under
// the names condor_submit, condor_q, condor_rm, condor_history,
// condor_hold and condor_starter, plays each (see fakecondor_test.go
// there), keeping its queue in the directory's state/. Give the directory
// to batch.Options.Bin, or put it first in a command's PATH.
func FakeCondor(t testing.TB) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(bin, "batch.test"), "./batch")
	build.Dir = ModuleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the fake HTCondor: %v\n%s", err, out)
	}
	for _, name := range []string{"condor_submit", "condor_q", "condor_rm", "condor_history", "condor_hold", "condor_starter"} {
		if err := os.Symlink("batch.test", filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"state/queue", "state/history"} {
		if err := os.MkdirAll(filepath.Join(bin, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// BuildSharedLib compiles the C source file src into a shared library in a
// temporary directory with the system's gcc and returns its path.
func BuildSharedLib(t testing.TB, src string) string {
	t.Helper()
	gcc := NeedCommand(t, "gcc", "apt-get install gcc")
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c")+".so")
	if b, err := exec.Command(gcc, "-O2", "-shared", "-fPIC", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, b)
	}
	return out
}

// BuildProgram compiles the C source file src into an executable in a
// temporary directory with the system's gcc and returns its path.
func BuildProgram(t testing.TB, src string) string {
	t.Helper()
	gcc := NeedCommand(t, "gcc", "apt-get install gcc")
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	if b, err := exec.Command(gcc, "-O2", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, b)
	}
	return out
}

// WriteScript writes an executable /bin/sh script with the given body into
// dir and returns its path.
func WriteScript(t testing.TB, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// SelfSignedCert makes a self-signed TLS certificate and its key with
// openssl, as the README tells users to, and returns their paths (the key
// readable by its owner only).
func SelfSignedCert(t testing.TB, name string) (cert, key string) {
	t.Helper()
	openssl := NeedCommand(t, "openssl", "apt-get install openssl")
	dir := t.TempDir()
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	out, err := exec.Command(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
		"-nodes", "-keyout", key, "-out", cert, "-subj", "/CN="+name, "-days", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// LoadPage loads url in headless Chromium (Debian's chromium, which
// scripts/deps.sh installs under CI), lets its scripts run for up to a few
// seconds, and returns the page's DOM as it then is. It also saves a
// screenshot, name.png, in $RIGHTSIZE_ARTIFACTS (or the test's temporary
// directory), and returns its path. The test is skipped when Chromium is
// missing outside CI, and fails under CI.
func LoadPage(t testing.TB, url, name string) (dom, screenshot string) {
	t.Helper()
	chromium := NeedCommand(t, "chromium", "apt-get install chromium")
	dir := os.Getenv("RIGHTSIZE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	screenshot = filepath.Join(dir, name+".png")
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Root runs it without the sandbox; the profile is the test's.
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
			"--virtual-time-budget=3000", "--window-size=1100,1000"}, append(args, url)...)
		cmd := exec.CommandContext(ctx, chromium, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	dom = run("--dump-dom")
	run("--screenshot=" + screenshot)
	return dom, screenshot
}
