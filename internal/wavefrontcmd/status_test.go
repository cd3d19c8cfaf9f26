package wavefrontcmd_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/status"
)

// TestStatusPage watches a real run in headless Chromium: a 2×2 region
// whose function waits on a pipe, so that the page is seen while the first
// cell runs; its progress picture is served with it.
func TestStatusPage(t *testing.T) {
	dir := makeRdir(t, 2, 2)
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
	cmd := wavefront(t, "-c", "1", "--http", ":0", fn, dir)
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
		if _, u, ok := strings.Cut(sc.Text(), "wavefront: status page at "); ok {
			url = u
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("no status page on the loopback interface (%q)", url)
	}
	// Opening the pipe waits for the first call to read it: it runs.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(url + "status")
	if err != nil {
		t.Fatal(err)
	}
	var s status.Snapshot
	json.NewDecoder(res.Body).Decode(&s)
	res.Body.Close()
	if s.Tool != "wavefront" || s.Total != 4 || s.Done != 0 || s.Unit != "cells" || s.Picture == "" || s.Mode != "multicore" {
		t.Errorf("status %+v", s)
	}
	if res, err := http.Get(url + s.Picture); err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" {
		t.Errorf("progress picture: %v %v", res, err)
	}
	dom, shot := testutil.LoadPage(t, url, "wavefront-status-page")
	for _, want := range []string{`<span id="total">4</span> <span id="unit">cells</span>`, `<div id="picture-box">`, `<img id="picture" alt="progress" src="picture.png?t=`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	t.Logf("screenshot: %s", shot)
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
