package pool

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
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
	policyFile := filepath.Join(dir, "pool.conf")
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(policyFile, []byte("max_workers: 4\ndistribution: alpha=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := batch.NewLocal(batch.Options{Slots: 1})
	t.Cleanup(func() { d.Close(context.Background()) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Driver: d, PolicyFile: policyFile, PasswordFile: pwFile, Catalogs: []string{cat},
			CatalogNetwork: "tcp", Name: "signed", Worker: testWorker(dir), Interval: 50 * time.Millisecond})
	}()
	t.Cleanup(func() { cancel(); <-done })

	decided := func(password string) int64 {
		recs, err := catalog.Query(context.Background(), cat, "")
		if err != nil {
			return -1
		}
		select {
		case err := <-done:
			t.Fatalf("pool: %v", err)
		default:
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
