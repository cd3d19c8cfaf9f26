package foreman

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// TestOfferFollowsJoinAtOnce: a worker that joins is in the foreman's
// offer without waiting for watch's next look, which here is an hour away.
func TestOfferFollowsJoinAtOnce(t *testing.T) {
	f, err := newForeman(workqueue.Config{Addr: "127.0.0.1:0", Logger: testutil.Logger(t)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{
			Masters: []string{fmt.Sprintf("127.0.0.1:%d", f.Port())},
			Cores:   3, MemoryMB: 100, DiskMB: 100, Workdir: t.TempDir(),
			Logger: testutil.Logger(t).With("side", "worker"),
		})
	}()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, "the offer to count the worker's 3 cores", 30*time.Second, func() bool {
		return f.Offer().Cores == 3
	})
	select {
	case <-f.OfferChanged():
	default:
		t.Error("the offer changed but OfferChanged said nothing")
	}
}
