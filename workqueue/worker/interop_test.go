package worker

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// A workflow with local inputs, a shared cached input, remote renaming, a
// task reading an earlier task's output, and directory input and output.
const interopWorkflow = `CATEGORY=small
CORES=1
MEMORY=100
in.txt:
	LOCAL echo input data > in.txt
shared.dat:
	LOCAL seq 1 20 > shared.dat
indir:
	LOCAL mkdir -p indir/sub && echo a > indir/a.txt && echo b > indir/sub/b.txt
out.txt -> remote_out.txt: in.txt -> remote_in.txt shared.dat
	cat remote_in.txt > remote_out.txt; wc -l < shared.dat >> remote_out.txt
second.txt: shared.dat out.txt
	cat out.txt shared.dat | wc -c > second.txt
outdir: indir
	mkdir -p outdir/x && cp -r indir/* outdir/ && echo c > outdir/x/c.txt
`

var interopOutputs = []string{"out.txt", "second.txt", "outdir/a.txt", "outdir/sub/b.txt", "outdir/x/c.txt"}

// TestServesCCToolsMakeflow runs CCTools' makeflow -T wq with this worker as
// its only worker and checks the outputs equal a local run's.
func TestServesCCToolsMakeflow(t *testing.T) {
	makeflow := testutil.NeedCCTools(t, "makeflow")
	// makeflow -T local cannot rename, so the local run names files as the
	// remote sandbox does.
	local := runMakeflow(t, makeflow, strings.NewReplacer(
		"out.txt -> remote_out.txt: in.txt -> remote_in.txt", "out.txt: in.txt",
		"remote_in.txt", "in.txt", "remote_out.txt", "out.txt").Replace(interopWorkflow), "-T", "local")
	remote := t.TempDir()
	os.WriteFile(filepath.Join(remote, "wf.mf"), []byte(interopWorkflow), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, makeflow, "-T", "wq", "-p", "0", "wf.mf")
	cmd.Dir = remote
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	port := waitForPort(t, stdout)
	werr := make(chan error, 1)
	go func() {
		werr <- Run(ctx, Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(port)}, Cores: 2, MemoryMB: 1000, DiskMB: 1000,
			Workdir: t.TempDir(), SingleShot: true, Logger: testutil.Logger(t)})
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("makeflow -T wq: %v\n%s", err, stderr.String())
	}
	if err := <-werr; err != nil {
		t.Errorf("worker: %v", err)
	}
	for _, name := range interopOutputs {
		want, err := os.ReadFile(filepath.Join(local, name))
		if err != nil {
			t.Fatalf("local run: %v", err)
		}
		got, err := os.ReadFile(filepath.Join(remote, name))
		if err != nil {
			t.Errorf("remote run: %v", err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s: remote %q, local %q", name, got, want)
		}
	}
}

func runMakeflow(t *testing.T, makeflow, workflow string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.mf"), []byte(workflow), 0o644)
	cmd := exec.Command(makeflow, append(args, "wf.mf")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("makeflow %v: %v\n%s", args, err, out)
	}
	return dir
}

var listeningRE = regexp.MustCompile(`listening for workers on port (\d+)`)

// waitForPort reads makeflow's stdout until it says which port it chose,
// then drains the rest in the background.
func waitForPort(t *testing.T, stdout interface{ Read([]byte) (int, error) }) int {
	t.Helper()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			p, _ := strconv.Atoi(m[1])
			return p
		}
	}
	t.Fatal("makeflow never said which port it listens on")
	return 0
}

// TestCCToolsMakeflowRulesWritingInputs: rules that append to the cached
// input they share. The worker drops the entry (cache-invalid) and gives
// the rules that held it back (forsaken); CCTools' master sends the file
// again and reruns them: every rule sees the input as makeflow made it.
func TestCCToolsMakeflowRulesWritingInputs(t *testing.T) {
	makeflow := testutil.NeedCCTools(t, "makeflow")
	const workflow = `shared.dat:
	LOCAL seq 1 20 > shared.dat
a.out: shared.dat
	echo more >> shared.dat; wc -l < shared.dat > a.out
b.out: shared.dat
	wc -l < shared.dat > b.out
c.out: shared.dat
	echo more >> shared.dat; wc -l < shared.dat > c.out
d.out: shared.dat
	wc -l < shared.dat > d.out
`
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.mf"), []byte(workflow), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, makeflow, "-T", "wq", "-p", "0", "wf.mf")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	port := waitForPort(t, stdout)
	werr := make(chan error, 1)
	go func() {
		werr <- Run(ctx, Config{Masters: []string{"127.0.0.1:" + strconv.Itoa(port)}, Cores: 2, MemoryMB: 1000, DiskMB: 1000,
			Workdir: t.TempDir(), SingleShot: true, Logger: testutil.Logger(t)})
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("makeflow -T wq: %v\n%s", err, stderr.String())
	}
	if err := <-werr; err != nil {
		t.Errorf("worker: %v", err)
	}
	for name, want := range map[string]string{"a.out": "21", "b.out": "20", "c.out": "21", "d.out": "20"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s: %q %v, want %s", name, got, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.dat")); strings.Count(string(b), "\n") != 20 {
		t.Errorf("makeflow's shared.dat changed: %q", b)
	}
}
