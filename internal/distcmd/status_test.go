package distcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/status"
	"github.com/rightsize/rightsize/workqueue"
)

func TestStatusPage(t *testing.T) {
	var none *StatusPage // no --http: every method does nothing
	none.SetDone(1)
	none.SetRunning(1)
	none.Fail("a", "b", "c")
	none.SetPicture(func() image.Image { return image.NewGray(image.Rect(0, 0, 1, 1)) })
	none.Finish(nil)
	if p, err := (&Flags{}).StartStatus("allpairs", "A × B", "cells", 10, io.Discard); p != nil || err != nil {
		t.Errorf("without --http: %v, %v", p, err)
	}

	var msgs strings.Builder
	f := &Flags{HTTP: ":0", BatchType: "slurm", Hybrid: true, Predicted: 42}
	p, err := f.StartStatus("allpairs", "A × B", "cells", 10, &msgs)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(msgs.String(), "allpairs: status page at "))
	p.SetDone(4)
	p.SetRunning(3)
	p.Fail("block 3", "exit status 1", "")
	snap := func() status.Snapshot {
		t.Helper()
		res, err := http.Get(url + "status")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var s status.Snapshot
		json.NewDecoder(res.Body).Decode(&s)
		return s
	}
	if s := snap(); s.Done != 4 || s.Running != 3 || s.Failed != 1 || s.Total != 10 || s.Mode != "hybrid" || s.Backend != "slurm" || s.Predicted != 42 || len(s.Workers) != 1 {
		t.Errorf("status %+v", s)
	}
	// Finishing lists the blocks a distributed run gave up, and stops
	// serving.
	p.Finish(&distmaster.FailedError{Total: 3, Blocks: []*distmaster.BlockError{{Block: "block 7", Err: errors.New("exit status 2"), Stderr: []byte("boom")}}})
	if _, err := http.Get(url + "status"); err == nil {
		t.Error("still serving after Finish")
	}
	if s := p.t.Snapshot(); !s.Finished || len(s.Failures) != 2 || s.Failures[1].Stderr != "boom" || !strings.Contains(s.Error, "1 of 3 blocks failed") {
		t.Errorf("finished: %+v", s)
	}
}

// TestWorkerRows: a status page lists each worker, up to maxWorkerRows
// rows; past that, the last row holds the rest, their counts summed.
func TestWorkerRows(t *testing.T) {
	for _, n := range []int{0, 1, maxWorkerRows, maxWorkerRows + 1, 1000} {
		var ws []workqueue.WorkerStats
		for i := range n {
			ws = append(ws, workqueue.WorkerStats{Host: "node", Addr: fmt.Sprint(i), Cores: 2, Running: 1, Completed: 3, FastAborts: i % 2})
		}
		rows := workerRows(ws)
		if len(rows) != min(n, maxWorkerRows) {
			t.Errorf("%d workers: %d rows, want %d", n, len(rows), min(n, maxWorkerRows))
		}
		var workers, running, aborts int
		var cores float64
		for _, r := range rows {
			workers += max(r.Count, 1)
			cores += r.Cores
			running += r.Running
			aborts += r.FastAborts
		}
		if workers != n || cores != float64(2*n) || running != n || aborts != n/2 {
			t.Errorf("%d workers: rows count %d workers, %v cores, %d running, %d fast aborts", n, workers, cores, running, aborts)
		}
		if n > maxWorkerRows {
			if last := rows[len(rows)-1]; last.Name != fmt.Sprintf("%d more workers", n-maxWorkerRows+1) {
				t.Errorf("%d workers: last row %q", n, last.Name)
			}
		}
	}
}
