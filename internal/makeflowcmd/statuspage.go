package makeflowcmd

import (
	"fmt"
	"io"
	"runtime"

	"github.com/rightsize/rightsize/internal/distcmd"
	"github.com/rightsize/rightsize/makeflow"
	"github.com/rightsize/rightsize/status"
)

// statusPage is the live status page of --http: the tracker the run
// reports to, and its server.
type statusPage struct {
	t   *status.Tracker
	srv *status.Server
}

// startStatus serves the run of wf (on batch type bt, as pl placed it)
// at o.httpAddr and says where on msgs; nil without --http.
func (o *options) startStatus(wf *makeflow.Workflow, bt batchType, pl *placement, msgs io.Writer) (*statusPage, error) {
	if o.httpAddr == "" {
		return nil, nil
	}
	t := status.New("makeflow", wf.Path, "rules")
	t.Progress(int64(len(wf.Rules)), 0, 0, 0)
	t.Update(func(s *status.Snapshot) {
		s.Mode, s.Backend = o.where(bt)
		if d := pl.decision; d != nil {
			s.Predicted = d.Predicted(d.Mode)
		}
	})
	cores := float64(runtime.NumCPU())
	if o.localCores > 0 {
		cores = float64(o.localCores)
	}
	t.SetRefresh(func(s *status.Snapshot) {
		// This machine runs what the cluster does not: all of it on a
		// local run, LOCAL rules (and, hybrid, some others) on a remote
		// one.
		here := status.Worker{Name: "this machine", Cores: cores, Running: int(s.Running), Completed: int(s.Done)}
		switch m := o.wqMaster; {
		case m != nil:
			i := len(s.Workers)
			s.Workers = append(s.Workers, here)
			st := distcmd.AddWorkQueue(s, m)
			s.Workers[i].Running, s.Workers[i].Completed = max(here.Running-st.TasksRunning, 0), max(here.Completed-st.TasksComplete, 0)
		case bt.remote:
			// The batch system's jobs and this machine's rules are
			// counted together.
			s.Workers = append(s.Workers, status.Worker{Name: bt.name + " jobs and this machine's rules", Running: here.Running, Completed: here.Completed})
		default:
			s.Workers = append(s.Workers, here)
		}
	})
	srv, err := status.Serve(o.httpAddr, t)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	fmt.Fprintf(msgs, "makeflow: status page at %s\n", srv.URL())
	return &statusPage{t, srv}, nil
}

// where says where the run on batch type bt goes: its mode and batch
// system.
func (o *options) where(bt batchType) (mode, backend string) {
	switch {
	case !bt.remote:
		return "multicore", ""
	case o.hybrid:
		return "hybrid", bt.name
	}
	return "distributed", bt.name
}

// progress reports the rule counts.
func (p *statusPage) progress(total int, c makeflow.Counts) {
	if p != nil {
		p.t.Progress(int64(total), int64(c.Complete), int64(c.Running), int64(c.Failed+c.Aborted))
	}
}

// failed reports a rule that failed for good.
func (p *statusPage) failed(f makeflow.Failure) {
	if p != nil {
		p.t.Fail(status.Failure{
			Name:   fmt.Sprintf("rule %d (%s)", f.Rule.ID, f.Rule.Pos),
			Status: f.Result.Status(),
			Stderr: string(f.Result.Stderr),
		})
	}
}

// finish marks the run ended and stops serving.
func (p *statusPage) finish(rep *makeflow.Report, err error) {
	if p == nil {
		return
	}
	if rep != nil {
		p.progress(int(rep.Counts.Total), rep.Counts)
	}
	p.t.Finish(err)
	p.srv.Close()
}
