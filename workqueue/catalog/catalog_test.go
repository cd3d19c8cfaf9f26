package catalog

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func startServer(t *testing.T) (*Server, *clock, string) {
	t.Helper()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	s, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Lifetime: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, clk, "127.0.0.1:" + strconv.Itoa(s.Port())
}

// waitFor polls the catalog until want records are there.
func waitFor(t *testing.T, addr, filter string, want int) []Record {
	t.Helper()
	return waitQuery(t, addr, filter, fmt.Sprintf("%d records", want), func(recs []Record) bool { return len(recs) == want })
}

// waitQuery polls the catalog at addr with filter until the records
// answered are what ok wants, and returns them; it fails the test, naming
// what was wanted, after 10 s. Updates are stored after they are sent
// (UDP has no answer, TCP's is the close), so tests wait for their effect.
// (testutil.WaitFor does this for other packages, but testutil imports
// this one.)
func waitQuery(t *testing.T, addr, filter, what string, ok func([]Record) bool) []Record {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-tick.C {
		recs, err := Query(context.Background(), addr, filter)
		if err == nil && ok(recs) {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: catalog has %d records (%v): %v", what, len(recs), err, recs)
		}
	}
}

func TestUpdatesOverEveryTransport(t *testing.T) {
	_, _, addr := startServer(t)
	ctx := context.Background()
	if err := Send(ctx, addr, "udp", Record{"type": "wq_master", "project": "udp", "port": 1001}); err != nil {
		t.Fatal(err)
	}
	if err := Send(ctx, addr, "tcp", Record{"type": "wq_master", "project": "tcp", "port": 1002}); err != nil {
		t.Fatal(err)
	}
	// CCTools' compressed form and its legacy name-value lines.
	var z bytes.Buffer
	z.WriteByte(0x1A)
	zw := zlib.NewWriter(&z)
	zw.Write([]byte(`{"type":"wq_master","project":"zlib","port":1003}`))
	zw.Close()
	udpSend(t, addr, z.Bytes())
	udpSend(t, addr, []byte("type wq_master\nproject nvpair\nport 1004\n"))
	udpSend(t, addr, []byte("{not json"))
	udpSend(t, addr, []byte{0x1A, 1, 2, 3})
	recs := waitFor(t, addr, "", 4)
	got := map[string]bool{}
	for _, m := range Masters(recs) {
		got[m.Project] = true
		if m.Address != "127.0.0.1" || m.Addr() != fmt.Sprintf("127.0.0.1:%d", m.Port) {
			t.Errorf("%s: address %q, Addr %q", m.Project, m.Address, m.Addr())
		}
	}
	for _, p := range []string{"udp", "tcp", "zlib", "nvpair"} {
		if !got[p] {
			t.Errorf("no record from the %s update", p)
		}
	}
}

func udpSend(t *testing.T, addr string, b []byte) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(b)
	c.Close()
}

func TestQueryFilterAndExpiry(t *testing.T) {
	_, clk, addr := startServer(t)
	ctx := context.Background()
	Send(ctx, addr, "udp", Record{"type": "wq_master", "project": "a", "port": 1, "tasks_waiting": 5})
	Send(ctx, addr, "udp", Record{"type": "wq_master", "project": "b", "port": 2, "tasks_waiting": 50, "lifetime": 10})
	Send(ctx, addr, "udp", Record{"type": "makeflow", "project": "a", "port": 3})
	waitFor(t, addr, "", 3)
	cases := []struct {
		filter string
		want   int
	}{
		{`true and type=="wq_manager" or type=="wq_master"`, 2}, // what work_queue_status sends
		{`type=="wq_master" && tasks_waiting > 10`, 1},
		{`!(project == "a")`, 1},
		{`not (type == "makeflow") and project != "b"`, 1},
		{`port >= 2`, 2},
	}
	for _, tc := range cases {
		if recs := waitFor(t, addr, tc.filter, tc.want); len(recs) != tc.want {
			t.Errorf("%s: %d records", tc.filter, len(recs))
		}
	}
	for _, bad := range []string{`type ==`, `(a`, `"open`, `a $ b`} {
		if _, err := Query(ctx, addr, bad); err == nil {
			t.Errorf("filter %q accepted", bad)
		}
	}
	resp, err := http.Get("http://" + addr + "/query/!!!notbase64")
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad base64: %v %v", resp.Status, err)
	}
	clk.add(30 * time.Second) // b's own lifetime is 10 s
	waitFor(t, addr, "", 2)
	clk.add(time.Minute) // the server's lifetime
	waitFor(t, addr, "", 0)
}

func TestDefaultAddrs(t *testing.T) {
	t.Setenv("CATALOG_HOST", "a, b:1")
	t.Setenv("CATALOG_PORT", "5")
	if got := DefaultAddrs(); fmt.Sprint(got) != "[a:5 b:1]" {
		t.Errorf("DefaultAddrs = %v", got)
	}
}

func TestFindMasters(t *testing.T) {
	_, _, empty := startServer(t)
	_, _, full := startServer(t)
	ctx := context.Background()
	Send(ctx, full, "udp", Record{"type": "wq_master", "project": "align-1", "port": 1})
	Send(ctx, full, "udp", Record{"type": "wq_manager", "project": "align-2", "port": 2})
	Send(ctx, full, "udp", Record{"type": "wq_master", "project": "other", "port": 3})
	Send(ctx, full, "udp", Record{"type": "makeflow", "project": "align-3", "port": 4})
	waitFor(t, full, "", 4)
	down := "127.0.0.1:1" // nothing listens there

	projects := func(ms []Master) []string {
		var ps []string
		for _, m := range ms {
			ps = append(ps, m.Project)
		}
		slices.Sort(ps)
		return ps
	}
	tests := []struct {
		addrs   []string
		project *regexp.Regexp
		want    []string
		wantErr bool
	}{
		// A catalog that is down, or that lists no such master, is passed
		// over for the next one.
		{[]string{down, empty, full}, regexp.MustCompile("^(align-.*)$"), []string{"align-1", "align-2"}, false},
		{[]string{full}, nil, []string{"align-1", "align-2", "other"}, false},
		{[]string{empty, full}, regexp.MustCompile("^(nothing)$"), nil, false},
		{[]string{down}, nil, nil, true},
		{nil, nil, nil, true},
	}
	for _, tt := range tests {
		got, err := FindMasters(ctx, tt.addrs, tt.project)
		if (err != nil) != tt.wantErr || !slices.Equal(projects(got), tt.want) {
			t.Errorf("FindMasters(%v, %v) = %v, %v; want %v (error: %v)", tt.addrs, tt.project, projects(got), err, tt.want, tt.wantErr)
		}
	}
}

// Answers past net/http's 2 KB buffer carry a Content-Length, not a chunked
// body, which CCTools' clients cannot read.
func TestLargeAnswersHaveContentLength(t *testing.T) {
	_, _, addr := startServer(t)
	pad := strings.Repeat("x", 1000)
	for i := range 5 {
		if err := Send(context.Background(), addr, "tcp", Record{"type": "wq_master", "project": fmt.Sprint("p", i), "port": 1000 + i, "pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, addr, "", 5)
	for _, path := range []string{"/query.json", "/"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/query.json" && len(body) < 5000 || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
			t.Errorf("%s: %d bytes, Content-Length %d, Transfer-Encoding %v", path, len(body), resp.ContentLength, resp.TransferEncoding)
		}
	}
}
