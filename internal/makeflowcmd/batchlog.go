package makeflowcmd

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rightsize/rightsize/workqueue"
)

// statsLogInterval is how often -L's Work Queue log gets a line, as
// CCTools writes one at most every 5 s.
const statsLogInterval = 5 * time.Second

// A batchLog is -L's batch system log. What it holds depends on -T, as in
// CCTools: with wq, the master's statistics in the columns of CCTools'
// Work Queue log (a line at the start, every 5 s and at the end); with
// dryrun, the shell script (see dryRunScript). CCTools writes nothing
// there for local, slurm or sge, and neither does this.
type batchLog struct {
	f    *os.File
	stop chan struct{}
	done sync.WaitGroup
	err  error
}

// startBatchLog starts writing the statistics of the Work Queue master m
// to path (appended to, as CCTools does).
func startBatchLog(path string, m *workqueue.Master) (*batchLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return nil, fmt.Errorf("-L: %w", err)
	}
	sl, err := workqueue.NewStatsLog(f)
	if err == nil {
		err = sl.Record(time.Now(), m.Stats())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("-L %s: %w", path, err)
	}
	l := &batchLog{f: f, stop: make(chan struct{})}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		tick := time.NewTicker(statsLogInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-l.stop:
				l.err = sl.Record(time.Now(), m.Stats())
				return
			}
			if err := sl.Record(time.Now(), m.Stats()); err != nil {
				l.err = err
				return
			}
		}
	}()
	return l, nil
}

// close writes the last line, before the master closes, and closes the
// file.
func (l *batchLog) close() error {
	if l == nil {
		return nil
	}
	close(l.stop)
	l.done.Wait()
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	if l.err != nil {
		return fmt.Errorf("-L: %w", l.err)
	}
	return nil
}
