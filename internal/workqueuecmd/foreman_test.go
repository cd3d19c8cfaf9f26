package workqueuecmd

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// cctoolsListening is what CCTools' makeflow -T wq says of its port.
var cctoolsListening = regexp.MustCompile(`listening for workers on port (\d+)`)

// TestForemanBetweenCCTools: CCTools' makeflow -T wq runs a workflow on
// CCTools' work_queue_worker through our worker in foreman mode between
// them (--foreman -Z FILE), and makes the same files as a local run.
func TestForemanBetweenCCTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workqueue command")
	}
	makeflow := testutil.NeedCCTools(t, "makeflow")
	cctoolsWorker := testutil.NeedCCTools(t, "work_queue_worker")
	bin := workqueueBinary(t)
	const wf = "in.txt:\n\tLOCAL seq 1 50 > in.txt\n" +
		"sum.txt: in.txt\n\tawk '{s+=$1} END {print s}' in.txt > sum.txt\n" +
		"count.txt: in.txt\n\twc -l < in.txt > count.txt\n" +
		"both.txt: sum.txt count.txt\n\tcat sum.txt count.txt > both.txt\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wf.mf"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mf := exec.CommandContext(ctx, makeflow, "-T", "wq", "-p", "0", "wf.mf")
	mf.Dir = dir
	stdout, _ := mf.StdoutPipe()
	var mfErr testutil.SyncBuffer
	mf.Stderr = &mfErr
	if err := mf.Start(); err != nil {
		t.Fatal(err)
	}
	port := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := cctoolsListening.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
			break
		}
	}
	if port == "" {
		t.Fatalf("makeflow never said its port:\n%s", mfErr.String())
	}
	go func() {
		for sc.Scan() {
		}
	}()

	portFile := filepath.Join(t.TempDir(), "foreman.port")
	fore := exec.CommandContext(ctx, bin, "worker", "--foreman", "-Z", portFile, "--single-shot", "-t", "60", "-s", t.TempDir(), "127.0.0.1", port)
	var foreOut testutil.SyncBuffer
	fore.Stdout, fore.Stderr = &foreOut, &foreOut
	if err := fore.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fore.Process.Kill()
		fore.Wait()
		if t.Failed() {
			t.Logf("foreman:\n%s", foreOut.String())
		}
	}()
	fport := testutil.WaitLine(t, portFile)
	cw := exec.CommandContext(ctx, cctoolsWorker, "--cores", "2", "--memory", "1000", "--disk", "1000", "-t", "60", "-s", t.TempDir(), "127.0.0.1", fport)
	if err := cw.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cw.Process.Kill(); cw.Wait() }()

	if err := mf.Wait(); err != nil {
		t.Fatalf("makeflow -T wq: %v\n%s", err, mfErr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "both.txt")); err != nil || string(b) != "1275\n50\n" {
		t.Errorf("both.txt = %q, %v; want the sum and the count of 1..50", b, err)
	}
}
