package testutil

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// StartCatalog starts a catalog server on a free port of 127.0.0.1 for the
// test, stopped when it ends, and returns its address.
func StartCatalog(t testing.TB) string {
	t.Helper()
	s, err := catalog.Listen(catalog.ServerConfig{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "127.0.0.1:" + strconv.Itoa(s.Port())
}

// SendUDPFrom sends rec to the catalog at cat in one datagram from the
// loopback address src (127.0.0.x), as a peer on that host would.
func SendUDPFrom(t testing.TB, cat, src string, rec catalog.Record) {
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
