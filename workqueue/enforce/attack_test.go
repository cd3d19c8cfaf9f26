package enforce

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
)

// The attacks of a hostile peer on the same network on the pools'
// decisions as they travel through a real catalog server: forged and
// replayed pool records, absurd values, forged master records. The pool
// sends from 127.0.0.1, the attacker from 127.0.0.2 (another host, to the
// catalog) unless a case says otherwise.

const (
	poolHost     = "127.0.0.1"
	attackerHost = "127.0.0.2"
)

// sendFrom sends rec to the catalog at cat over UDP from the address src,
// as a peer on that host would.
func sendFrom(t *testing.T, cat, src string, rec catalog.Record) {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp", cat)
	if err != nil {
		t.Fatal(err)
	}
	send(t, "udp", dst, &net.UDPAddr{IP: net.ParseIP(src)}, rec)
}

// sendTCPFrom sends rec as sendFrom does, over TCP: a burst of large
// datagrams may be dropped by the kernel, a TCP update is not.
func sendTCPFrom(t *testing.T, cat, src string, rec catalog.Record) {
	t.Helper()
	dst, err := net.ResolveTCPAddr("tcp", cat)
	if err != nil {
		t.Fatal(err)
	}
	dst.Port++
	send(t, "tcp", dst, &net.TCPAddr{IP: net.ParseIP(src)}, rec)
}

func send(t *testing.T, network string, dst, src net.Addr, rec catalog.Record) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: src}
	conn, err := d.Dial(network, dst.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

// queryWhen queries the catalog at cat until it holds n records.
func queryWhen(t *testing.T, cat string, n int) []catalog.Record {
	t.Helper()
	var recs []catalog.Record
	testutil.WaitFor(t, fmt.Sprintf("the catalog to hold %d records", n), 30*time.Second, func() bool {
		var err error
		recs, err = catalog.Query(context.Background(), cat, "")
		return err == nil && len(recs) == n
	})
	return recs
}

// signedPool is a pool "tp"'s record, signed under password (unsigned if
// nil), decided at.
func signedPool(password string, at time.Time, as ...Assignment) catalog.Record {
	rec := catalog.Record{"type": PoolType, "name": "tp", "port": 0}
	var pw []byte
	if password != "" {
		pw = []byte(password)
	}
	Sign(rec, as, pw, at)
	return rec
}

// TestForgedPoolRecords: the pool "tp" gives master h:9000 two workers; an
// attacker publishes records of "tp" that give it none. Neither a forgery
// nor a replay of the pool's old decision may make the master release
// the workers the pool's record keeps.
func TestForgedPoolRecords(t *testing.T) {
	t0 := time.Now()
	give := func(n int) Assignment {
		return Assignment{Project: "p", Name: "h", Port: 9000, Address: poolHost, Workers: n}
	}
	self := Self{Name: "h", Port: 9000}
	for _, tc := range []struct {
		name     string
		password string // the masters', the pool's and the workers'
		pool     catalog.Record
		forged   []catalog.Record
		want     map[string]int // the workers of QuotasForMaster
	}{
		{"no password: the most generous record", "", signedPool("", t0, give(2)),
			[]catalog.Record{signedPool("", t0.Add(time.Hour), give(0))}, map[string]int{"tp": 2}},
		{"no password: the master under another project", "", signedPool("", t0, give(2)),
			[]catalog.Record{signedPool("", t0.Add(time.Hour),
				Assignment{Project: "q", Name: "h", Port: 9000, Address: poolHost, Workers: 0},
				Assignment{Project: "p", Name: "h", Port: 9000, Address: attackerHost, Workers: 0})},
			map[string]int{"tp": 2}},
		{"no password: a forgery alone is honoured", "", nil,
			[]catalog.Record{signedPool("", t0, give(0))}, map[string]int{"tp": 0}},
		{"unsigned forgery", "s3cret", signedPool("s3cret", t0, give(2)),
			[]catalog.Record{signedPool("", t0.Add(time.Hour), give(0))}, map[string]int{"tp": 2}},
		{"signed with another password", "s3cret", signedPool("s3cret", t0, give(2)),
			[]catalog.Record{signedPool("guess", t0.Add(time.Hour), give(0))}, map[string]int{"tp": 2}},
		{"signature of another decision", "s3cret", signedPool("s3cret", t0, give(2)),
			[]catalog.Record{func() catalog.Record {
				r := signedPool("s3cret", t0.Add(time.Hour), give(3))
				r["assignments"] = []Assignment{give(0)}
				return r
			}()}, map[string]int{"tp": 2}},
		{"signature moved to a later time", "s3cret", signedPool("s3cret", t0, give(2)),
			[]catalog.Record{func() catalog.Record {
				r := signedPool("s3cret", t0.Add(-time.Hour), give(0))
				r[FieldDecided] = t0.Add(time.Hour).UnixMilli()
				return r
			}()}, map[string]int{"tp": 2}},
		{"replayed old decision", "s3cret", signedPool("s3cret", t0, give(2)),
			[]catalog.Record{signedPool("s3cret", t0.Add(-2*time.Minute), give(0))}, map[string]int{"tp": 2}},
		{"old decision replayed alone", "s3cret", nil,
			[]catalog.Record{signedPool("s3cret", time.Now().Add(-time.Hour), give(0))}, map[string]int{}},
		{"decision of a pool an hour ahead of the catalog's clock", "s3cret", nil,
			[]catalog.Record{signedPool("s3cret", time.Now().Add(time.Hour), give(1))}, map[string]int{}},
		{"decision of a pool a little behind the catalog's clock", "s3cret", nil,
			[]catalog.Record{signedPool("s3cret", time.Now().Add(-time.Minute), give(1))}, map[string]int{"tp": 1}},
		{"forgery alone with a password", "s3cret", nil,
			[]catalog.Record{signedPool("", t0, give(0))}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := testutil.StartCatalog(t)
			n := len(tc.forged)
			if tc.pool != nil {
				sendFrom(t, cat, poolHost, tc.pool)
				n++
			}
			for _, f := range tc.forged {
				sendFrom(t, cat, attackerHost, f)
			}
			recs := queryWhen(t, cat, n)
			var pw []byte
			if tc.password != "" {
				pw = []byte(tc.password)
			}
			got := workers(QuotasForMaster(NewReader(pw).Read(recs), self))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("the master enforces %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReplayAfterNewer: once a master has honoured the pool's decision,
// a replay of an older one, even alone in the catalog (the attacker sent
// it from the pool's own address, replacing the pool's record), is not
// honoured: the master keeps the decision it honoured last.
func TestReplayAfterNewer(t *testing.T) {
	t0 := time.Now().Add(-3 * time.Minute)
	give := func(n int) Assignment {
		return Assignment{Project: "p", Name: "h", Port: 9000, Address: poolHost, Workers: n}
	}
	cat := testutil.StartCatalog(t)
	r := NewReader([]byte("s3cret"))
	old := signedPool("s3cret", t0, give(0))
	sendFrom(t, cat, poolHost, old)
	if got := workers(QuotasForMaster(r.Read(queryWhen(t, cat, 1)), Self{"h", 9000})); got["tp"] != 0 || len(got) != 1 {
		t.Fatalf("first decision: %v, want tp:0", got)
	}
	sendFrom(t, cat, poolHost, signedPool("s3cret", t0.Add(time.Minute), give(2)))
	testutil.WaitFor(t, "the newer decision in the catalog", 30*time.Second, func() bool {
		recs, _ := catalog.Query(context.Background(), cat, "")
		return len(recs) == 1 && recs[0].Int(FieldDecided) == t0.Add(time.Minute).UnixMilli()
	})
	if got := workers(QuotasForMaster(r.Read(queryWhen(t, cat, 1)), Self{"h", 9000})); got["tp"] != 2 {
		t.Fatalf("newer decision: %v, want tp:2", got)
	}
	sendFrom(t, cat, poolHost, old) // the same key: it replaces the pool's record
	testutil.WaitFor(t, "the replay in the catalog", 30*time.Second, func() bool {
		recs, _ := catalog.Query(context.Background(), cat, "")
		return len(recs) == 1 && recs[0].Int(FieldDecided) == t0.UnixMilli()
	})
	if got := workers(QuotasForMaster(r.Read(queryWhen(t, cat, 1)), Self{"h", 9000})); len(got) != 1 || got["tp"] != 2 {
		t.Errorf("after the replay the master enforces %v, want tp:2, the decision honoured last", got)
	}
}

// TestAbsurdPoolRecords: records of the pool that say what no pool would
// are not read, and none costs a reader more than a linear pass; the
// worker's choice among huge but allowed slots does not overflow.
func TestAbsurdPoolRecords(t *testing.T) {
	many := make([]Assignment, MaxAssignments+1)
	for i := range many {
		many[i] = Assignment{Project: "p", Name: "h", Port: 9000 + i%1000, Address: poolHost, Workers: 1}
	}
	for _, tc := range []struct {
		name string
		as   any
	}{
		{"negative workers", []Assignment{{Project: "p", Name: "h", Port: 9000, Address: poolHost, Workers: -5}}},
		{"1e18 workers", []map[string]any{{"project": "p", "name": "h", "port": 9000, "address": poolHost, "workers": 1e18}}},
		{"2^53 workers", []map[string]any{{"project": "p", "name": "h", "port": 9000, "address": poolHost, "workers": 1 << 53}}},
		{"fraction of a worker", []map[string]any{{"project": "p", "name": "h", "port": 9000, "address": poolHost, "workers": 0.5}}},
		{"workers as text", []map[string]any{{"project": "p", "name": "h", "port": 9000, "address": poolHost, "workers": "NaN"}}},
		{"port past 65535", []map[string]any{{"project": "p", "name": "h", "port": 1 << 40, "address": poolHost, "workers": 1}}},
		{"name not a string", []map[string]any{{"project": "p", "name": []int{1}, "port": 9000, "address": poolHost, "workers": 1}}},
		{"assignment not an object", []any{"h:9000=1"}},
		{"too many assignments", many},
		{"not a list", "h:9000=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := catalog.Record{"type": PoolType, "name": "tp", "port": 0, "assignments": tc.as}
			if ds := Decisions(records(t, rec), nil); len(ds) != 0 {
				t.Errorf("read %d decisions, want none", len(ds))
			}
		})
	}
	huge := []Slot{{Remaining: 1 << 62}, {Remaining: 1 << 62}, {Remaining: 1 << 62}}
	if i := Choose(huge, 0.99); i != 2 {
		t.Errorf("Choose among three huge slots at 0.99 = %d, want 2", i)
	}
}

// TestAbsurdRecordsThroughCatalog: a 10 MB assignment list never reaches a
// reader (the catalog drops it), and a flood of as many pool records as
// the catalog takes from one host, of the pool's subnet, leaves the pool's
// own decision read.
func TestAbsurdRecordsThroughCatalog(t *testing.T) {
	cat := testutil.StartCatalog(t)
	sendFrom(t, cat, poolHost, signedPool("", time.Now(), Assignment{Project: "p", Name: "h", Port: 9000, Address: poolHost, Workers: 2}))
	// 10 MB over TCP (UDP cannot carry it): dropped whole.
	big := catalog.Record{"type": PoolType, "name": "tp", "port": 0, "assignments": []map[string]string{{"project": strings.Repeat("x", 10<<20)}}}
	if err := catalog.Send(context.Background(), cat, "tcp", big); err != nil {
		t.Logf("sending 10 MB: %v", err) // the catalog may close early
	}
	// The flood: 200 records of "tp" of 200 assignments each, giving 0
	// to the master, from the attacker's host. Each is 15 KB of JSON and
	// about 120 KB of the catalog's memory, which it counts: the last 100
	// (an address's bound) fit in the subnet's share, 16 MiB, beside the
	// pool's. (Of 500 assignments, near the size limit, about 50 would,
	// and the next would replace the pool's record, heard once.)
	var as []Assignment
	for i := range 100 {
		as = append(as, Assignment{Project: "p", Name: "h", Port: 9000, Address: poolHost})
		as = append(as, Assignment{Project: "p", Name: fmt.Sprintf("other%d", i), Port: 9000, Address: attackerHost})
	}
	for i := range 200 {
		rec := signedPool("", time.Now(), as...)
		rec["uuid"] = fmt.Sprint(i) // a distinct record each
		sendTCPFrom(t, cat, attackerHost, rec)
	}
	recs := queryWhen(t, cat, 101) // the pool's, and the attacker's last 100
	start := time.Now()
	got := workers(QuotasForMaster(Decisions(recs, nil), Self{"h", 9000}))
	if got["tp"] != 2 {
		t.Errorf("under the flood the master enforces %v, want tp:2", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("reading the flooded catalog took %v", d)
	}
}

// TestForgedMasterRecord: an attacker publishes a record claiming to be a
// master of the pool's decision (its project, name and port) from its own
// host, with none of the pool's workers, and a record of the pool that
// points that master's address at itself. A worker of the pool with the
// password is sent to neither.
func TestForgedMasterRecord(t *testing.T) {
	cat := testutil.StartCatalog(t)
	pw := "s3cret"
	real := masterAt("p", "h", "", 9000, "tp:1")
	delete(real, "address") // the catalog sets it
	sendFrom(t, cat, poolHost, real)
	sendFrom(t, cat, poolHost, signedPool(pw, time.Now(),
		Assignment{Project: "p", Name: "h", Port: 9000, Address: poolHost, Workers: 3}))
	fake := masterAt("p", "h", "", 9000, "tp:0")
	delete(fake, "address")
	sendFrom(t, cat, attackerHost, fake)
	sendFrom(t, cat, attackerHost, signedPool("", time.Now().Add(time.Hour),
		Assignment{Project: "p", Name: "h", Port: 9000, Address: attackerHost, Workers: 100}))
	recs := queryWhen(t, cat, 4)
	slots, ok := Slots("tp", recs, []byte(pw))
	want := []Slot{{Addr: poolHost + ":9000", Remaining: 2}}
	if !ok || fmt.Sprint(slots) != fmt.Sprint(want) {
		t.Errorf("Slots = %v, %v; want %v", slots, ok, want)
	}
	// Without a password the forged pool record cannot be told from the
	// pool's, but the master it names must be heard from the address it
	// gives: the attacker's master record is, so the worker may go there.
	slots, _ = Slots("tp", recs, nil)
	for _, s := range slots {
		if s.Addr == poolHost+":9000" && s.Remaining != 2 {
			t.Errorf("without a password, the real master's slot is %d, want 2 (its own record's count)", s.Remaining)
		}
	}
}
