package catalog

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// floodUpdates returns n updates as a flood sends them, each of about 400
// bytes of JSON, compressed as CCTools compresses, from n addresses in
// 4,096 /24s.
func floodUpdates(b *testing.B, n int) ([][]byte, []net.Addr) {
	bodies := make([][]byte, n)
	from := make([]net.Addr, n)
	pad := strings.Repeat("f", 300)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	for i := range n {
		js, err := json.Marshal(Record{"type": "wq_master", "project": "flood", "port": 20000 + i%40000, "pad": pad})
		if err != nil {
			b.Fatal(err)
		}
		z.Reset()
		z.WriteByte(0x1A)
		zw.Reset(&z)
		zw.Write(js)
		zw.Close()
		bodies[i] = bytes.Clone(z.Bytes())
		from[i] = &net.UDPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), Port: 9000}
	}
	return bodies, from
}

// BenchmarkFlood measures what one update costs the server (decoding,
// encoding, storing, and replacing a record when full; not the socket)
// with the default limits: "new" is a flood of new records into a full
// catalog, each replacing the oldest heard once; "refresh" is updates of
// records held; "decode" is the decoding and encoding every update needs,
// the anchor.
func BenchmarkFlood(b *testing.B) {
	const n = 1 << 17 // more than the 64 MiB holds: about 34,000
	bodies, from := floodUpdates(b, n)
	now := time.Unix(1_800_000_000, 0)
	newServer := func() *Server {
		return &Server{
			cfg:   ServerConfig{Lifetime: time.Hour, MaxRecord: 64 << 10, Now: func() time.Time { return now }},
			store: newStore(100, 16<<20, 64<<20),
		}
	}
	b.Run("new", func(b *testing.B) {
		s := newServer()
		for i := range n { // fill it
			s.update(bodies[i], from[i], false)
		}
		b.ReportMetric(float64(len(s.store.records)), "records")
		b.ResetTimer()
		for i := range b.N {
			// Addresses not heard yet: 10.2.x.x onwards.
			j := n + i
			s.update(bodies[i%n], &net.UDPAddr{IP: net.IPv4(10, byte(j>>16), byte(j>>8), byte(j)), Port: 9000}, false)
		}
	})
	b.Run("refresh", func(b *testing.B) {
		s := newServer()
		const held = 30000
		for i := range held {
			s.update(bodies[i], from[i], false)
		}
		b.ResetTimer()
		for i := range b.N {
			s.update(bodies[i%held], from[i%held], false)
		}
	})
	b.Run("decode", func(b *testing.B) { decode(b, bodies, now, true) })
	// As the server decoded before it kept its zlib readers.
	b.Run("decode-new-reader", func(b *testing.B) { decode(b, bodies, now, false) })
}

// decode decodes and encodes the updates in turn, as every update is,
// with a zlib reader kept from one to the next or a new one each.
func decode(b *testing.B, bodies [][]byte, now time.Time, keep bool) {
	kept := new(sync.Pool)
	for i := range b.N {
		inflaters := kept
		if !keep {
			inflaters = new(sync.Pool)
		}
		rec, err := decodeUpdate(bodies[i%len(bodies)], 256<<10, inflaters)
		if err != nil {
			b.Fatal(err)
		}
		rec["address"] = "10.0.0.1"
		rec["lastheardfrom"] = float64(now.Unix())
		if _, err := json.Marshal(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFullCatalogHeap reports the Go heap a full catalog of the
// flood's records takes (heap-MiB), against what MaxTotal counts
// (counted-MiB, the default 64 MiB) and their JSON.
func BenchmarkFullCatalogHeap(b *testing.B) {
	bodies, from := floodUpdates(b, 50000)
	now := time.Unix(1_800_000_000, 0)
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := &Server{
			cfg:   ServerConfig{Lifetime: time.Hour, MaxRecord: 64 << 10, Now: func() time.Time { return now }},
			store: newStore(100, 16<<20, 64<<20),
		}
		for i := range bodies {
			s.update(bodies[i], from[i], false)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		js := 0
		for _, e := range s.store.records {
			js += len(e.json)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(s.store.total)/(1<<20), "counted-MiB")
		b.ReportMetric(float64(js)/(1<<20), "json-MiB")
		b.ReportMetric(float64(len(s.store.records)), "records")
		runtime.KeepAlive(s)
	}
}
