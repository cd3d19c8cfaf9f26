package makeflow

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch"
)

// TestSubmitRetryPacing checks the pauses between attempts at a refused
// submission on logical time: 1 s, doubling, up to the timeout, and
// nothing once the timeout has passed.
func TestSubmitRetryPacing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		timeout time.Duration
		at      []time.Duration // when each refusal comes, after t0
		want    []time.Duration // the pause decided, or -1 for giving up
	}{
		{10 * time.Second, []time.Duration{0, 1, 3, 7, 10, 11}, []time.Duration{1, 2, 4, 8, 10, -1}},
		{3 * time.Second, []time.Duration{0, 1, 3, 4}, []time.Duration{1, 2, 3, -1}},
		{500 * time.Millisecond, []time.Duration{0}, []time.Duration{-1}},
	}
	for _, tt := range tests {
		r := newSubmitRetry(Start{}, nil, t0, tt.timeout, time.Second)
		for i, at := range tt.at {
			now := t0.Add(at * time.Second)
			if tt.timeout < time.Second {
				now = t0.Add(tt.timeout + time.Millisecond)
			}
			wait, ok := r.next(now)
			want := tt.want[i]
			switch {
			case want < 0 && ok:
				t.Errorf("timeout %v: refusal at +%ds: pause %v, want giving up", tt.timeout, at, wait)
			case want >= 0 && (!ok || wait != min(want*time.Second, tt.timeout)):
				t.Errorf("timeout %v: refusal at +%ds: pause %v (%v), want %v", tt.timeout, at, wait, ok, min(want*time.Second, tt.timeout))
			}
		}
	}
}

// refusing is a remote executor that runs jobs with Local, but refuses
// the first refusals submissions as a batch system's failing command does.
type refusing struct {
	*Local
	refusals int
	err      error
}

func (r *refusing) Submit(job *Job) (int64, error) {
	if r.refusals > 0 {
		r.refusals--
		return 0, r.err
	}
	return r.Local.Submit(job)
}

func TestSubmitTimeout(t *testing.T) {
	commandErr := &batch.CommandError{Args: []string{"sbatch"}, Err: errors.New("exit status 1"), Output: "Slurm controller not responding"}
	tests := []struct {
		name     string
		refusals int
		err      error
		timeout  time.Duration
		ok       bool
	}{
		{"refused twice, then taken", 2, commandErr, time.Minute, true},
		{"refused until the timeout", 1 << 30, commandErr, 20 * time.Millisecond, false},
		{"a wrong job fails at once", 1, errors.New("input x: no such file"), time.Hour, false},
		{"no retries with a negative timeout", 1, commandErr, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTestRun(t, "out:\n\techo done > out\n")
			l, err := NewLocal(LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			remote := &refusing{Local: l, refusals: tt.refusals, err: tt.err}
			defer l.Close()
			rep, err := tr.run(context.Background(), Options{Remote: remote, RemoteLimits: Limits{Jobs: 1},
				SubmitTimeout: tt.timeout, firstSubmitWait: time.Millisecond})
			if tt.ok {
				if err != nil || tr.read("out") != "done\n" {
					t.Fatalf("run: %v\n%s", err, tr.out.String())
				}
				if n := strings.Count(tr.out.String(), "couldn't submit batch job, still trying"); n != 2 {
					t.Errorf("said it would try again %d times, want 2:\n%s", n, tr.out.String())
				}
				return
			}
			var fe *FailedError
			if !errors.As(err, &fe) || len(rep.Failures) != 1 {
				t.Fatalf("run: %v, want the rule failed", err)
			}
			if _, serr := os.Stat(tr.dir + "/out"); serr == nil {
				t.Errorf("the refused rule ran")
			}
			if tt.err == commandErr && tt.timeout > 0 && !strings.Contains(tr.out.String(), "unable to submit the job after") {
				t.Errorf("no word of giving up:\n%s", tr.out.String())
			}
		})
	}
}
