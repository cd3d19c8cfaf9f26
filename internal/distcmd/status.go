package distcmd

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/rightsize/rightsize/status"
)

// A StatusPage is a run's live status page (--http): package status's
// tracker and its server. A nil StatusPage (no --http) does nothing.
type StatusPage struct {
	t            *status.Tracker
	srv          *status.Server
	total        int64
	done, failed atomic.Int64
}

// StartStatus serves the status page of tool's run of title (total units)
// at --http's address, and says where on msgs; nil without --http. The
// page says where the run goes (the flags as placement left them) and what
// it was predicted to take.
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
		if !f.Distributed() || f.Hybrid {
			s.Workers = []status.Worker{{Name: "this machine", Cores: float64(cores)}}
		}
	})
	srv, err := status.Serve(f.HTTP, t)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	fmt.Fprintf(msgs, "%s: status page at %s\n", tool, srv.URL())
	return &StatusPage{t: t, srv: srv, total: total}, nil
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
		p.t.Progress(p.total, n, 0, p.failed.Load())
	}
}

// Fail reports a unit (a cell, a block) that failed for good: name, how,
// and the end of its standard error, if any.
func (p *StatusPage) Fail(name, how, stderr string) {
	if p != nil {
		p.t.Fail(status.Failure{Name: name, Status: how, Stderr: stderr})
		p.t.Progress(p.total, p.done.Load(), 0, p.failed.Add(1))
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
