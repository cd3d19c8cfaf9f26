package pool

import (
	"context"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/batchtest"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/enforce"
)

// TestPoolDecisionSigned: a pool given the masters' password file
// publishes its decision signed with it, and later decisions later: the
// masters and workers that hold the password read it, a reader with
// another password does not.
func TestPoolDecisionSigned(t *testing.T) {
	cat := testutil.StartCatalog(t)
	dir := t.TempDir()
	policyFile, pwFile := writeGuarded(t, dir, "max_workers: 4\ndistribution: alpha=1\n")
	startPool(t, Config{Driver: batchtest.Local(t, 1), PolicyFile: policyFile, PasswordFile: pwFile, Catalogs: []string{cat},
		CatalogNetwork: "tcp", Name: "signed", Worker: testWorker(dir), Interval: 50 * time.Millisecond})

	decided := func(password string) int64 {
		recs, err := catalog.Query(context.Background(), cat, "")
		if err != nil {
			return -1
		}
		for _, d := range enforce.Decisions(recs, []byte(password)) {
			if d.Pool == "signed" {
				return d.Decided
			}
		}
		return 0
	}
	var first int64
	waitFor(t, "the pool's decision, read with the password", func() bool {
		first = decided("s3cret\n")
		return first > 0
	})
	waitFor(t, "a later decision", func() bool { return decided("s3cret\n") > first })
	if n := decided("guess"); n != 0 {
		t.Errorf("a reader with another password read the decision of %d", n)
	}
}
