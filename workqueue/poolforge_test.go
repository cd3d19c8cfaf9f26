package workqueue

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestPoolForgedDecisionNotEnforced: a hostile peer on another host
// (127.0.0.2) publishes records of pool "tp" that give master A no
// workers: one unsigned and decided later than the pool's, and, with a
// password, a replay of the pool's own signed decision of before. The
// pool's latest decision gives A one of its two workers. A releases one
// worker, not both, and the other runs every task.
func TestPoolForgedDecisionNotEnforced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		password string
	}{
		{"no password", ""},
		{"password", "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pw []byte
			if tc.password != "" {
				pw = []byte(tc.password)
			}
			cat := testutil.StartCatalog(t)
			a := startMaster(t, Config{Project: projectName(t), Catalogs: []string{cat}, Password: pw,
				AdvertiseInterval: 200 * time.Millisecond})
			t0 := time.Now()
			decision := func(workers int, password []byte, at time.Time) catalog.Record {
				host, _ := os.Hostname()
				rec := catalog.Record{"type": enforce.PoolType, "name": "tp", "port": 0}
				enforce.Sign(rec, []enforce.Assignment{{Project: a.cfg.Project, Name: host, Port: a.Port(),
					Address: "127.0.0.1", Workers: workers}}, password, at)
				return rec
			}
			old := decision(0, pw, t0.Add(-time.Minute)) // the pool's, seen in the catalog before
			sendUDPFrom(t, cat, "127.0.0.1", decision(2, pw, t0))
			for range 2 {
				startWorker(t, a, worker.Config{Cores: 1, Pool: "tp", Password: pw})
			}
			waitMinute(t, "both workers connected", func() bool { return len(a.Workers()) == 2 })

			sendUDPFrom(t, cat, "127.0.0.2", decision(0, nil, t0.Add(time.Hour)))
			if pw != nil {
				old["uuid"] = "replay" // another record than the forgery's
				sendUDPFrom(t, cat, "127.0.0.2", old)
			}
			sendUDPFrom(t, cat, "127.0.0.1", decision(1, pw, t0.Add(time.Second)))
			var kept string
			waitMinute(t, "one worker released, back and kept drained, the other not drained", func() bool {
				ws := a.Workers()
				if len(ws) != 2 || ws[0].Draining == ws[1].Draining || a.Stats().WorkersReleased != 1 {
					return false
				}
				kept = ws[0].Addr
				if ws[0].Draining {
					kept = ws[1].Addr
				}
				return true
			})
			for i := range 3 {
				if _, err := a.Submit(&Task{Command: "true", Tag: strconv.Itoa(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for tag, r := range waitAll(t, a, 3) {
				if !r.OK() || r.Worker != kept {
					t.Errorf("task %s: %v on %s; want done on %s", tag, r.Status, r.Worker, kept)
				}
			}
			if n := a.Stats().WorkersReleased; n != 1 {
				t.Errorf("A released %d workers, want 1", n)
			}
		})
	}
}

// sendUDPFrom sends rec to the catalog at cat in one datagram from the
// address src, as a peer on that host would.
func sendUDPFrom(t *testing.T, cat, src string, rec catalog.Record) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}
	conn, err := d.DialContext(context.Background(), "udp", cat)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
}
