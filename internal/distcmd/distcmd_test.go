package distcmd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// TestWorkQueueWarnings: the Work Queue master's warnings (here, a worker
// that left) reach the messages stream, without -v.
func TestWorkQueueWarnings(t *testing.T) {
	r, w := io.Pipe()
	defer r.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(r); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	f := &Flags{BatchType: "wq", Port: 0}
	opened := make(chan error, 1)
	var d batch.Driver
	var closeDriver func()
	go func() {
		var err error
		d, closeDriver, err = f.Open("allpairs", "allpairs", t.TempDir(), w)
		opened <- err
	}()
	<-lines // where it listens
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	defer closeDriver()
	defer r.Close() // first, so that Close's own messages do not block
	if cfg := f.Config(d, t.TempDir(), io.Discard); cfg.Logger == nil {
		t.Error("the distributed master gets no logger")
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", d.(batch.Listener).Port()))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "workqueue 9 w Linux x86_64 1\nresource cores 1 1 1\nresource tag 0\n")
	conn.Close()
	timeout := time.After(time.Minute) // a failure, not a measurement
	for {
		select {
		case line := <-lines:
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "worker left") {
				return
			}
		case <-timeout:
			t.Fatal("no warning in a minute")
		}
	}
}
