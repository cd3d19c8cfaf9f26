package testutil

import (
	"context"
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
