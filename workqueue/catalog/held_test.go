package catalog

import (
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heldShapes are records of the shapes that take the most and the least
// memory for their JSON, and those a catalog sees: a flood's, a CCTools
// master's, one long string.
var heldShapes = []struct {
	name string
	rec  func(i int) Record
}{
	{"flood", func(i int) Record {
		return Record{"type": "wq_master", "project": "flood", "port": i, "pad": strings.Repeat("f", 300)}
	}},
	{"one field", func(i int) Record { return Record{"port": i} }},
	{"master", func(i int) Record {
		r := Record{"type": "wq_master", "project": "proj", "port": i}
		for k := range 60 {
			r[fmt.Sprint("count_", k)] = float64(k * 1000)
		}
		for k := range 20 {
			r[fmt.Sprint("name_", k)] = "some value here"
		}
		return r
	}},
	{"long string", func(i int) Record { return Record{"port": i, "pad": strings.Repeat("x", 8000)} }},
	{"empty arrays", func(i int) Record {
		a := make([]any, 50)
		for k := range a {
			a[k] = []any{}
		}
		return Record{"port": i, "a": a}
	}},
	{"empty objects", func(i int) Record {
		r := Record{"port": i}
		for k := range 30 {
			r[fmt.Sprint("o", k)] = map[string]any{}
		}
		return r
	}},
	{"short strings", func(i int) Record {
		r := Record{"port": i}
		for k := range 30 {
			r[fmt.Sprint("s", k)] = "ab"
		}
		return r
	}},
}

// fillMeasured stores n records made by rec, each from an address of its
// own, in a server without limits, and returns the Go heap they take and
// what the store counts them for.
func fillMeasured(t testing.TB, n int, rec func(i int) Record) (heap, counted, js int) {
	now := time.Unix(1_800_000_000, 0)
	bodies := make([][]byte, n)
	for i := range bodies {
		b, err := json.Marshal(rec(i))
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := &Server{cfg: ServerConfig{Lifetime: time.Hour, MaxRecord: 64 << 10, Now: func() time.Time { return now }},
		store: newStore(100, 1<<40, 1<<40)}
	for i, b := range bodies {
		s.update(b, &net.UDPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), Port: 9000}, false)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(bodies) // allocated before, so not counted
	for _, e := range s.store.records {
		js += len(e.json)
	}
	if len(s.store.records) != n {
		t.Fatalf("%d records stored of %d", len(s.store.records), n)
	}
	heap = int(after.HeapAlloc) - int(before.HeapAlloc)
	runtime.KeepAlive(s)
	return heap, s.store.total, js
}

// TestHeldBytesMatchesHeap: what the limits count a record for is the Go
// heap it takes, within a quarter, whatever its shape (its JSON is from a
// fourteenth to most of it).
func TestHeldBytesMatchesHeap(t *testing.T) {
	for _, sh := range heldShapes {
		t.Run(sh.name, func(t *testing.T) {
			heap, counted, js := fillMeasured(t, 2000, sh.rec)
			ratio := float64(heap) / float64(counted)
			t.Logf("heap %d, counted %d (%.2f), JSON %d (heap %.2f times it)", heap, counted, ratio, js, float64(heap)/float64(js))
			if ratio < 0.75 || ratio > 1.25 {
				t.Errorf("the records take %d bytes of heap and count for %d: %.2f times", heap, counted, ratio)
			}
		})
	}
}
