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

// storedSize returns what the server counts rec for against its limits,
// sent from src.
func storedSize(t *testing.T, src string, rec Record) int {
	t.Helper()
	body, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: ServerConfig{Lifetime: time.Hour, MaxRecord: 64 << 10, Now: time.Now}, store: newStore(100, 1<<30, 1<<30)}
	s.update(body, &net.UDPAddr{IP: net.ParseIP(src), Port: 9000}, false)
	if len(s.store.records) != 1 {
		t.Fatalf("the record of %v was not stored", rec)
	}
	return s.store.total
}

// floodTotal is a MaxTotal that holds about 95 of the flood's records.
func floodTotal(t *testing.T) int {
	return 95 * storedSize(t, floodSource(0), floodRecord(0, ""))
}

// TestTotalLimit: when the records fill MaxTotal, the masters already
// listed keep updating theirs, and a new record replaces the oldest of
// those heard once.
func TestTotalLimit(t *testing.T) {
	pad := strings.Repeat("x", 1500)
	size := storedSize(t, "127.0.0.2", Record{"type": "wq_master", "port": 1000, "pad": pad})
	limit := 6*size + size/2
	_, _, addr := startServerWith(t, ServerConfig{MaxTotal: limit, MaxPerSubnet: limit})
	for i := range 10 {
		sendFrom(t, fmt.Sprintf("127.0.0.%d", 2+i), addr, Record{"type": "wq_master", "port": 1000 + i, "pad": pad})
	}
	// Six fit, the last six sent. An update of one of them still lands.
	sendFrom(t, "127.0.0.8", addr, Record{"type": "wq_master", "port": 1006, "pad": pad, "tasks_waiting": 7})
	waitQuery(t, addr, "tasks_waiting == 7", "the update of a listed master", func(recs []Record) bool { return len(recs) == 1 })
	recs, err := Query(context.Background(), addr, "")
	if got := ports(recs); err != nil || len(got) != 6 || got[1003] || !got[1004] || !got[1009] {
		t.Errorf("ports %v (%v); want the last six", got, err)
	}
}

// sendUntil sends rec from src every poll until the catalog's records
// satisfy ok, as a master advertising itself would, so that a datagram the
// kernel drops under a flood does not fail the test.
func sendUntil(t *testing.T, src, addr string, rec Record, what string, ok func([]Record) bool) []Record {
	t.Helper()
	return waitQuery(t, addr, "", what, func(recs []Record) bool {
		if ok(recs) {
			return true
		}
		sendFrom(t, src, addr, rec)
		return false
	})
}

// tcpSendFrom sends one update over TCP from the loopback address src.
func tcpSendFrom(t *testing.T, src, addr string, rec Record) {
	t.Helper()
	body, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(p+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
}

// has reports whether recs hold a record of port from address src, with
// the field key at value if key is not "".
func has(recs []Record, src string, port int, key string, value float64) bool {
	for _, r := range recs {
		if r.String("address") == src && r.Int("port") == int64(port) && (key == "" || r.Float(key) == value) {
			return true
		}
	}
	return false
}

// floodSource is the address the flood's i'th record comes from: one of
// the 127.0.100-107.x subnets, each address as long as the others, so
// that, for i below 10,000, every record of the flood has one size.
func floodSource(i int) string { return fmt.Sprintf("127.0.%d.%d", 100+i%8, 10+i/8%90) }

// floodOne sends the flood's i'th record, of about 400 bytes of JSON.
func floodOne(t *testing.T, addr string, i int) {
	t.Helper()
	sendFrom(t, floodSource(i), addr, floodRecord(i, ""))
}

// floodRecord is the flood's i'th record, its padding starting with mark.
func floodRecord(i int, mark string) Record {
	return Record{"type": "wq_master", "project": "flood", "port": 20000 + i, "pad": mark + strings.Repeat("f", 300-len(mark))}
}

// flood sends the flood's records from to from+n-1, each from an address
// of its own.
func flood(t *testing.T, addr string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		floodOne(t, addr, i)
	}
}

// refreshHeardOnce refreshes the flood's records the server holds as heard
// once: those whose refresh the kernel dropped, or which were dropped
// before and came back new.
func refreshHeardOnce(t *testing.T, srv *Server, clk *clock, addr string) {
	t.Helper()
	for round := 0; ; round++ {
		var once []int
		srv.mu.Lock()
		for _, e := range srv.store.records {
			if e.standing == heardOnce {
				once = append(once, int(e.rec.Int("port"))-20000)
			}
		}
		srv.mu.Unlock()
		if len(once) == 0 {
			return
		}
		if round == 10 {
			t.Fatalf("records %v still heard once after %d rounds of refreshes", once, round)
		}
		clk.add(2 * time.Second)
		for _, i := range once {
			rec := floodRecord(i, "")
			sendUntil(t, floodSource(i), addr, rec, fmt.Sprint("a refresh of flood record ", i), func([]Record) bool { return refreshedPort(srv, 20000+i) })
		}
	}
}

// refreshedPort reports whether the server holds a refreshed record of port.
func refreshedPort(srv *Server, port int) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, e := range srv.store.records {
		if e.rec.Int("port") == int64(port) && e.standing == refreshed {
			return true
		}
	}
	return false
}

// floodRead sends the flood's records from to from+n-1 and returns the
// catalog's records once it has read them all.
func floodRead(t *testing.T, addr string, from, n int) []Record {
	t.Helper()
	flood(t, addr, from, n)
	// Its last record stored (sent again if the kernel dropped it), the
	// flood has been read.
	last := from + n - 1
	return sendUntil(t, floodSource(last), addr, floodRecord(last, ""), "the flood's last record",
		func(r []Record) bool { return has(r, floodSource(last), 20000+last, "", 0) })
}

// standings counts the server's records of each standing.
func standings(s *Server) map[standing]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[standing]int{}
	for _, e := range s.store.records {
		out[e.standing]++
	}
	return out
}

// TestFloodFromManyAddresses: a flood of new records from many addresses
// in several subnets fills the catalog. A master advertising before it
// stays listed and updated throughout; a master that starts during it is
// listed at its first update and, refreshed at its interval before the
// flood has sent as many records as the catalog holds, stays listed.
func TestFloodFromManyAddresses(t *testing.T) {
	const interval = time.Minute
	srv, clk, addr := startServerWith(t, ServerConfig{MaxTotal: floodTotal(t)})
	held := func() int { return len(srv.Records()) }

	old := Record{"type": "wq_master", "project": "old", "port": 1000, "seq": 1}
	sendUntil(t, "127.0.0.2", addr, old, "the old master", func(r []Record) bool { return has(r, "127.0.0.2", 1000, "", 0) })
	clk.add(interval)
	old["seq"] = 2
	sendUntil(t, "127.0.0.2", addr, old, "the old master's refresh", func(r []Record) bool { return has(r, "127.0.0.2", 1000, "seq", 2) })

	flood(t, addr, 0, 300)
	newer := Record{"type": "wq_master", "project": "new", "port": 1001, "seq": 1}
	sendUntil(t, "127.0.0.3", addr, newer, "the new master at its first update", func(r []Record) bool { return has(r, "127.0.0.3", 1001, "", 0) })
	if recs := floodRead(t, addr, 300, 40); !has(recs, "127.0.0.3", 1001, "", 0) {
		t.Fatal("the new master is gone before its second update")
	}
	clk.add(interval)
	newer["seq"] = 2
	sendUntil(t, "127.0.0.3", addr, newer, "the new master's refresh", func(r []Record) bool { return has(r, "127.0.0.3", 1001, "seq", 2) })

	for round := range 3 {
		recs := floodRead(t, addr, 1000+round*300, 300)
		if !has(recs, "127.0.0.2", 1000, "seq", float64(2+round)) || !has(recs, "127.0.0.3", 1001, "seq", float64(2+round)) {
			t.Fatalf("round %d: a master is gone after the flood: %d records", round, len(recs))
		}
		clk.add(interval)
		old["seq"], newer["seq"] = 3+round, 3+round
		sendUntil(t, "127.0.0.2", addr, old, "the old master's update", func(r []Record) bool { return has(r, "127.0.0.2", 1000, "seq", float64(3+round)) })
		sendUntil(t, "127.0.0.3", addr, newer, "the new master's update", func(r []Record) bool { return has(r, "127.0.0.3", 1001, "seq", float64(3+round)) })
		if n := held(); n < 60 {
			t.Errorf("round %d: %d records held; the flood did not fill the catalog", round, n)
		}
	}
}

// TestTCPMasterDuringRefreshedFlood: a flood that refreshes its records
// from many addresses fills the catalog with records that new ones over
// UDP cannot replace; a master advertising over TCP is still listed, and
// UDP updates claiming its address do not change its record.
func TestTCPMasterDuringRefreshedFlood(t *testing.T) {
	srv, clk, addr := startServerWith(t, ServerConfig{MaxTotal: floodTotal(t)})
	// 200 records, of which the last hundred or so fit, then all again
	// in reverse: those held are refreshed and the others, new, find no
	// record heard once to replace.
	flood(t, addr, 0, 200)
	clk.add(2 * time.Second)
	for i := 199; i >= 0; i-- {
		floodOne(t, addr, i)
	}
	// A marker, a refresh of a record held, sent last: once it is
	// stored, every update sent before it has been read.
	// (Of a record still held: the master over TCP replaces one.)
	marker := func(mark string) {
		i := 199
		for _, r := range srv.Records() {
			if r.String("project") == "flood" {
				i = int(r.Int("port")) - 20000
			}
		}
		rec := floodRecord(i, mark)
		sendUntil(t, floodSource(i), addr, rec, "the marker "+mark, func(r []Record) bool { return hasField(r, "pad", rec.String("pad")) })
	}
	marker("flooded")
	refreshHeardOnce(t, srv, clk, addr)
	if n := standings(srv); n[heardOnce] != 0 || n[refreshed] < 60 {
		t.Fatalf("records of each standing: %v; want the catalog full of refreshed ones", n)
	}

	tcpSendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "tcp", "port": 1000, "tasks_waiting": 1})
	waitQuery(t, addr, `project == "tcp"`, "the master over TCP", func(r []Record) bool { return len(r) == 1 })
	sendFrom(t, "127.0.0.1", addr, Record{"type": "wq_master", "project": "tcp", "port": 1000, "tasks_waiting": 99})
	// Larger than the room the flood leaves.
	sendFrom(t, "127.0.0.5", addr, Record{"type": "wq_master", "project": "udp", "port": 1000, "pad": strings.Repeat("u", 1000)})
	marker("spoofed")
	recs, err := Query(context.Background(), addr, `project == "tcp" || project == "udp"`)
	if err != nil || len(recs) != 1 || recs[0].Int("tasks_waiting") != 1 {
		t.Errorf("records %v (%v); want the TCP master's unchanged by the UDP update, and the new master over UDP not listed", recs, err)
	}
}

func hasField(recs []Record, key, value string) bool {
	for _, r := range recs {
		if r.String(key) == value {
			return true
		}
	}
	return false
}

// TestSubnetFloodLeavesRoom: a flood from one /24 (a sender confined to
// its own network's addresses, spoofed or not), refreshed, holds at most
// MaxPerSubnet; masters elsewhere are listed as they start.
func TestSubnetFloodLeavesRoom(t *testing.T) {
	total := floodTotal(t)
	srv, clk, addr := startServerWith(t, ServerConfig{MaxTotal: total})
	pad := strings.Repeat("s", 300)
	send := func(i int) {
		sendFrom(t, fmt.Sprintf("127.0.9.%d", 1+i), addr, Record{"type": "wq_master", "project": "subnet", "port": 20000 + i, "pad": pad})
	}
	for i := range 200 {
		send(i)
	}
	clk.add(2 * time.Second)
	for i := 199; i >= 0; i-- {
		send(i) // those held are refreshed, the others dropped
	}
	for i := range 20 {
		src := fmt.Sprintf("127.0.%d.1", 10+i)
		sendUntil(t, src, addr, Record{"type": "wq_master", "project": "new", "port": 1000, "pad": pad}, "a master from "+src,
			func(r []Record) bool { return has(r, src, 1000, "", 0) })
	}
	recs, err := Query(context.Background(), addr, `project == "new"`)
	if err != nil || len(recs) != 20 {
		t.Errorf("%d new masters listed (%v), want 20", len(recs), err)
	}
	srv.mu.Lock()
	bytes := srv.store.subnetBytes(subnetOf("127.0.9.1"))
	srv.mu.Unlock()
	if limit := total / 4; bytes > limit || bytes < limit/2 {
		t.Errorf("the subnet holds %d bytes; want most of its share, %d, and no more", bytes, limit)
	}
}

// TestSpoofedSourceKeepsMastersRecord: new records sent from a master's
// own address (as anyone can over UDP) replace the address's records heard
// once, not the master's, refreshed at its interval.
func TestSpoofedSourceKeepsMastersRecord(t *testing.T) {
	_, clk, addr := startServerWith(t, ServerConfig{})
	m := Record{"type": "wq_master", "project": "real", "port": 1000, "seq": 1}
	sendUntil(t, "127.0.0.4", addr, m, "the master", func(r []Record) bool { return has(r, "127.0.0.4", 1000, "", 0) })
	clk.add(time.Minute)
	m["seq"] = 2
	sendUntil(t, "127.0.0.4", addr, m, "the master's refresh", func(r []Record) bool { return has(r, "127.0.0.4", 1000, "seq", 2) })
	for p := 2000; p < 2150; p++ {
		sendFrom(t, "127.0.0.4", addr, Record{"type": "wq_master", "project": "spoof", "port": p})
	}
	recs := waitForPort(t, addr, 2149)
	if got := ports(recs); len(got) != 100 || !got[1000] || got[2050] || !got[2051] {
		t.Errorf("kept ports %v; want the master's and the newest 99 others", got)
	}
}
