package allpairscmd

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize/status"
)

// TestStatusPage: with --http, a run serves its status while it runs;
// here one cell waits on a pipe until the status has been read.
func TestStatusPage(t *testing.T) {
	items := t.TempDir()
	for _, name := range []string{"x", "y"} {
		if err := os.WriteFile(filepath.Join(items, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fn := filepath.Join(t.TempDir(), "wait.sh")
	// Each call waits on the pipe until the gate exists.
	gate := fifo + ".open"
	if err := os.WriteFile(fn, []byte("#!/bin/sh\n[ -e "+gate+" ] || cat "+fifo+" >/dev/null\necho 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "allpairs"), "-c", "1", "-q", "--http", ":0", "-o", filepath.Join(t.TempDir(), "out"), fn, items, items)
	t.Cleanup(func() { cmd.Process.Kill() })
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var url string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "allpairs: status page at "); ok {
			url = u
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	// Opening the pipe waits for the first call to read it: it runs.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(url + "status")
	if err != nil {
		t.Fatalf("no status page (%q): %v", url, err)
	}
	var s status.Snapshot
	json.NewDecoder(res.Body).Decode(&s)
	res.Body.Close()
	if s.Tool != "allpairs" || s.Total != 4 || s.Done != 0 || s.Unit != "cells" || s.Mode != "multicore" || s.Finished {
		t.Errorf("status %+v", s)
	}
	// Open the gate, then release the call waiting on the pipe (-c 1:
	// only one runs; the others see the gate).
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.WriteString("go\n")
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
}
