package testutil

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
)

// StartWithStatusPage starts cmd (a tool run with --http :0) and returns
// the address of its status page, which the tool announces on standard
// error as "TOOL: status page at URL"; the rest of standard error is
// read and dropped. The test fails if the page is not on the loopback
// interface.
func StartWithStatusPage(t testing.TB, cmd *exec.Cmd, tool string) string {
	t.Helper()
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
		if _, u, ok := strings.Cut(sc.Text(), tool+": status page at "); ok {
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
	return url
}

// GetJSON decodes the JSON that url serves into v.
func GetJSON(t testing.TB, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// A HeldFunction is a function program (for allpairs or wavefront; it
// prints 1) whose first call waits until released, so that a test can
// look at a run while it goes. Run the tool with one core, so that the
// first call is the only one.
type HeldFunction struct {
	Program    string
	fifo, gate string
	w          *os.File
}

// HoldFunction writes a HeldFunction.
func HoldFunction(t testing.TB) *HeldFunction {
	t.Helper()
	dir := t.TempDir()
	h := &HeldFunction{Program: filepath.Join(dir, "held.sh"), fifo: filepath.Join(dir, "go"), gate: filepath.Join(dir, "open")}
	if err := syscall.Mkfifo(h.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A call waits on the pipe until the gate exists.
	script := "#!/bin/sh\n[ -e " + h.gate + " ] || cat " + h.fifo + " >/dev/null\necho 1\n"
	if err := os.WriteFile(h.Program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// WaitFirst returns once the first call is waiting: opening the pipe
// waits for it to read.
func (h *HeldFunction) WaitFirst(t testing.TB) {
	t.Helper()
	w, err := os.OpenFile(h.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
}

// Release opens the gate for the calls to come, then lets the waiting one
// go.
func (h *HeldFunction) Release(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(h.gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.w.WriteString("go\n")
	h.w.Close()
}
