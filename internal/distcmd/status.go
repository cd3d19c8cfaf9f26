package distcmd

import (
	"bytes"
	"cmp"
	"fmt"
	"image"
	"image/png"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/rightsize/rightsize/status"
	"github.com/rightsize/rightsize/workqueue"
)

// A StatusPage is a run's live status page (--http): package status's
// tracker and its server. A nil StatusPage (no --http) does nothing.
type StatusPage struct {
	t                     *status.Tracker
	srv                   *status.Server
	total                 int64
	done, running, failed atomic.Int64
}

// StartStatus serves the status page of tool's run of title (total units)
// at --http's address, and says where on msgs; nil without --http. The
// page says where the run goes (the flags as placement left them), what
// it was predicted to take, and the Work Queue workers of the master Open
// started.
func (f *Flags) StartStatus(tool, title, unit string, total int64, msgs io.Writer) (*StatusPage, error) {
	if f.HTTP == "" {
		return nil, nil
	}
	t := status.New(tool, title, unit)
	t.Progress(total, 0, 0, 0)
	cores := runtime.NumCPU()
	t.Update(func(s *status.Snapshot) {
		s.Mode, s.Backend = f.where()
		s.Predicted = f.Predicted
		// A Work Queue master's workers include this machine's own, in
		// a hybrid run.
		if !f.Distributed() || f.Hybrid && f.master == nil {
			s.Workers = []status.Worker{{Name: "this machine", Cores: float64(cores)}}
		}
	})
	if m := f.master; m != nil {
		t.SetRefresh(func(s *status.Snapshot) { AddWorkQueue(s, m) })
	}
	srv, err := status.Serve(f.HTTP, t)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	fmt.Fprintf(msgs, "%s: status page at %s\n", tool, srv.URL())
	return &StatusPage{t: t, srv: srv, total: total}, nil
}

// maxWorkerRows bounds the workers a status page lists one by one; the
// others share its last row, so that a page of a run on thousands of
// workers stays small.
const maxWorkerRows = 100

// AddWorkQueue lists master m's connected workers in s, one row each, and
// its capacity, and returns m's statistics.
func AddWorkQueue(s *status.Snapshot, m *workqueue.Master) workqueue.Stats {
	st := m.Stats()
	s.Workers = append(s.Workers, workerRows(m.Workers())...)
	s.Capacity = cmp.Or(st.Capacity, st.CapacityWeighted)
	return st
}

// workerRows returns the rows of workers ws: one each, but past
// maxWorkerRows the last row holds the rest.
func workerRows(ws []workqueue.WorkerStats) []status.Worker {
	shown := ws
	if len(ws) > maxWorkerRows {
		shown = ws[:maxWorkerRows-1]
	}
	rows := make([]status.Worker, 0, len(shown)+1)
	for _, w := range shown {
		rows = append(rows, status.Worker{
			Name:  fmt.Sprintf("%s (%s)", w.Host, w.Addr),
			Cores: w.Cores, Running: w.Running, Completed: w.Completed, FastAborts: w.FastAborts,
		})
	}
	if rest := ws[len(shown):]; len(rest) > 0 {
		r := status.Worker{Name: fmt.Sprintf("%d more workers", len(rest)), Count: len(rest)}
		for _, w := range rest {
			r.Cores += w.Cores
			r.Running += w.Running
			r.Completed += w.Completed
			r.FastAborts += w.FastAborts
		}
		rows = append(rows, r)
	}
	return rows
}

// MasterOf returns driver d's Work Queue master, or nil if it has none.
func MasterOf(d any) *workqueue.Master {
	if m, ok := d.(interface{ Master() *workqueue.Master }); ok {
		return m.Master()
	}
	return nil
}

// where says where the run goes, as the flags (after placement) say: its
// mode and batch system.
func (f *Flags) where() (mode, backend string) {
	switch {
	case !f.Distributed():
		return "multicore", ""
	case f.Hybrid:
		return "hybrid", f.BatchType
	}
	return "distributed", f.BatchType
}

// SetDone reports n units done (the progress bar's signature).
func (p *StatusPage) SetDone(n int64) {
	if p != nil {
		p.done.Store(n)
		p.t.Progress(p.total, n, p.running.Load(), p.failed.Load())
	}
}

// SetRunning reports n units in the jobs on their way: submitted and not
// yet ended (distmaster.Config.InFlight's signature).
func (p *StatusPage) SetRunning(n int64) {
	if p != nil {
		p.running.Store(n)
		p.t.Progress(p.total, p.done.Load(), n, p.failed.Load())
	}
}

// Fail reports a unit (a cell, a block) that failed for good: name, how,
// and the end of its standard error, if any.
func (p *StatusPage) Fail(name, how, stderr string) {
	if p != nil {
		p.t.Fail(status.Failure{Name: name, Status: how, Stderr: stderr})
		p.t.Progress(p.total, p.done.Load(), p.running.Load(), p.failed.Add(1))
	}
}

// SetPicture serves the picture draw returns, as a PNG, on the page.
func (p *StatusPage) SetPicture(draw func() image.Image) {
	if p != nil {
		p.t.SetPicture(func() ([]byte, error) {
			var b bytes.Buffer
			err := png.Encode(&b, draw())
			return b.Bytes(), err
		})
	}
}

// Finish marks the run ended (with err if it failed; the blocks a
// distributed run gave up are listed) and stops serving.
func (p *StatusPage) Finish(err error) {
	if p == nil {
		return
	}
	if fe, ok := IsFailed(err); ok {
		for _, b := range fe.Blocks {
			p.Fail(b.Block, b.Err.Error(), string(b.Stderr))
		}
	}
	p.t.Finish(err)
	p.srv.Close()
}
