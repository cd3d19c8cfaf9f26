package distcmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/distmaster"
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
	f := &Flags{BatchType: "wq", Port: 0, Tool: "allpairs"}
	opened := make(chan error, 1)
	var d batch.Driver
	var closeDriver func()
	go func() {
		var err error
		d, closeDriver, err = f.Open("allpairs", t.TempDir(), w)
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

// TestReportFailuresNumbers: the failed blocks are counted in the number
// each count needs.
func TestReportFailuresNumbers(t *testing.T) {
	blocks := func(n int) []*distmaster.BlockError {
		var bs []*distmaster.BlockError
		for i := range n {
			bs = append(bs, &distmaster.BlockError{Block: fmt.Sprint(i), Attempts: 3, Err: errors.New("exit status 1")})
		}
		return bs
	}
	for _, tt := range []struct {
		failed, total int
		more, err     string // "" for no "more" line
	}{
		{1, 1, "", "1 of 1 block failed; kept; run the same command again to retry it"},
		{1, 5, "", "1 of 5 blocks failed; kept; run the same command again to retry it"},
		{3, 20, "", "3 of 20 blocks failed; kept; run the same command again to retry them"},
		{maxShownBlocks + 1, 40, "t: … and 1 more failed block\n", fmt.Sprintf("%d of 40 blocks failed; kept; run the same command again to retry them", maxShownBlocks+1)},
		{maxShownBlocks + 2, 40, "t: … and 2 more failed blocks\n", fmt.Sprintf("%d of 40 blocks failed; kept; run the same command again to retry them", maxShownBlocks+2)},
	} {
		var out strings.Builder
		err := ReportFailures(&out, "t", &distmaster.FailedError{Blocks: blocks(tt.failed), Total: tt.total}, "kept")
		if err.Error() != tt.err {
			t.Errorf("%d of %d: error %q, want %q", tt.failed, tt.total, err, tt.err)
		}
		if got := strings.Contains(out.String(), "more failed"); got != (tt.more != "") || tt.more != "" && !strings.HasSuffix(out.String(), tt.more) {
			t.Errorf("%d of %d: printed\n%s\nwant it to end with %q", tt.failed, tt.total, out.String(), tt.more)
		}
	}
}
