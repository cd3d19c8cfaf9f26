package batch_test

import (
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// newTestDriver returns a driver of the given kind for a test: a spool of
// its own, and quicker polling than the defaults unless opts says otherwise.
func newTestDriver(t *testing.T, kind string, opts batch.Options) batch.Driver {
	t.Helper()
	if opts.Spool == "" {
		opts.Spool = t.TempDir()
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.ExitGrace == 0 {
		opts.ExitGrace = time.Second
	}
	d, err := batch.New(kind, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
