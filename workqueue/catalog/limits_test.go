package catalog

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startServerWith runs a server with cfg (on a free port, with a fake clock).
func startServerWith(t *testing.T, cfg ServerConfig) (*Server, *clock, string) {
	t.Helper()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	cfg.Addr, cfg.Now = "127.0.0.1:0", clk.Now
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, clk, "127.0.0.1:" + strconv.Itoa(s.Port())
}

// sendFrom sends one update over UDP from the loopback address src
// (127.0.0.x), compressed as CCTools compresses large records.
func sendFrom(t *testing.T, src, addr string, rec Record) {
	t.Helper()
	body, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	z.WriteByte(0x1A)
	zw := zlib.NewWriter(&z)
	zw.Write(body)
	zw.Close()
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(z.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// waitForPort waits until the catalog answers with a record of port,
// which was sent last from its source: UDP updates are stored in order.
func waitForPort(t *testing.T, addr string, port int) []Record {
	t.Helper()
	return waitQuery(t, addr, "", fmt.Sprintf("a record of port %d", port), func(recs []Record) bool { return ports(recs)[int64(port)] })
}

func ports(recs []Record) map[int64]bool {
	out := map[int64]bool{}
	for _, r := range recs {
		out[r.Int("port")] = true
	}
	return out
}

// TestHugeUpdatesDoNotSpoilQueries: 80 records of 1 MB (the attack that
// made every -M worker and `workqueue status` fail with "unexpected end of
// JSON input") are dropped, and the catalog still answers with the real
// masters.
func TestHugeUpdatesDoNotSpoilQueries(t *testing.T) {
	_, _, addr := startServerWith(t, ServerConfig{})
	pad := strings.Repeat("x", 1_000_000)
	for i := range 80 {
		sendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "big", "port": 2000 + i, "pad": pad})
	}
	sendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "real", "port": 1000})
	recs := waitForPort(t, addr, 1000)
	ms, err := FindMasters(context.Background(), []string{addr}, nil)
	if err != nil || len(ms) != 1 || ms[0].Project != "real" {
		t.Errorf("FindMasters = %v, %v; want the real master only (%d records)", ms, err, len(recs))
	}
}

// TestUnencodableRecordDoesNotSpoilQueries: a legacy update whose value
// reads as NaN must not leave the answer with a dangling comma.
func TestUnencodableRecordDoesNotSpoilQueries(t *testing.T) {
	_, _, addr := startServerWith(t, ServerConfig{})
	udpSend(t, addr, []byte("type wq_master\nproject good\nport 1001\n"))
	udpSend(t, addr, []byte("type wq_master\nproject odd\nport NaN\n"))
	udpSend(t, addr, []byte("type wq_master\nproject last\nport 1002\n"))
	recs := waitForPort(t, addr, 1002)
	if len(recs) != 3 {
		t.Errorf("%d records, want 3: %v", len(recs), recs)
	}
}

// TestRecordsPerSource: one address holds at most MaxPerSource records;
// a new one replaces its oldest, other addresses keep theirs, and expired
// records make room.
func TestRecordsPerSource(t *testing.T) {
	_, clk, addr := startServerWith(t, ServerConfig{Lifetime: time.Minute})
	sendFrom(t, "127.0.0.2", addr, Record{"type": "wq_master", "project": "other", "port": 1})
	for p := 1000; p < 1150; p++ {
		sendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "flood", "port": p})
	}
	got := ports(waitForPort(t, addr, 1149))
	if len(got) != 101 || !got[1] || got[1049] || !got[1050] {
		t.Errorf("kept ports %v; want the newest 100 from the flooding address and the other's", got)
	}
	clk.add(2 * time.Minute)
	sendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "later", "port": 3000})
	if got := ports(waitForPort(t, addr, 3000)); len(got) != 1 {
		t.Errorf("after expiry: ports %v, want only the new record", got)
	}
}

// TestTotalLimit: when the records fill MaxTotal, new records are dropped
// but the masters already listed keep updating theirs.
func TestTotalLimit(t *testing.T) {
	_, _, addr := startServerWith(t, ServerConfig{MaxTotal: 10 << 10})
	pad := strings.Repeat("x", 1500)
	for i := range 10 {
		sendFrom(t, fmt.Sprintf("127.0.0.%d", 2+i), addr, Record{"type": "wq_master", "port": 1000 + i, "pad": pad})
	}
	// Each record is about 1.6 KB: six fit in 10 KiB. The last source's
	// record was dropped; an update from the first source still lands.
	sendFrom(t, "127.0.0.2", addr, Record{"type": "wq_master", "port": 1000, "pad": pad, "tasks_waiting": 7})
	waitQuery(t, addr, "tasks_waiting == 7", "the first master's update", func(recs []Record) bool { return len(recs) == 1 })
	recs, err := Query(context.Background(), addr, "")
	if got := ports(recs); err != nil || len(got) != 6 || got[1009] {
		t.Errorf("ports %v (%v); want the first six", got, err)
	}
}
