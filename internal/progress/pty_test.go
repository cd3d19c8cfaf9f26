//go:build linux

package progress

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pty: %v", err)
	}
	return m, s
}

func TestBarOnTerminal(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	defer slave.Close()
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				close(done)
				return
			}
		}
	}()

	b := New(slave, "cells", 100)
	if !b.Active() {
		t.Fatal("bar on a terminal is not active")
	}
	b.SetStatus("failed 1")
	for i := 0; i < 5; i++ {
		b.Add(10)
		time.Sleep(120 * time.Millisecond)
	}
	fmt.Fprintln(b.Writer(slave), "a result line")
	time.Sleep(250 * time.Millisecond)
	b.Stop()
	slave.Close()
	master.SetReadDeadline(time.Now().Add(time.Second))
	<-done

	s := got.String()
	for _, want := range []string{"/100 cells", "cells/s", "ETA", "failed 1", "a result line", "\r\033[K"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output %q does not contain %q", s, want)
		}
	}
}
