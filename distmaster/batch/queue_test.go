package batch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	now := time.Unix(1000, 0)
	grace := 5 * time.Second
	obs := func(p phase) observation { return observation{phase: p, state: "S"} }
	tests := []struct {
		name      string
		started   bool
		goneSince time.Duration // before now; 0: not gone
		removing  bool
		hasExit   bool
		asked     bool
		obs       observation
		listed    bool
		want      verdict
		gone      bool // whether the grace clock runs afterwards
	}{
		{name: "exit file wins", hasExit: true, asked: true, obs: obs(running), listed: true, want: exited},
		{name: "exit file while removing", hasExit: true, removing: true, want: removed},
		{name: "not asked", asked: false, want: keep},
		{name: "waiting", asked: true, obs: obs(waiting), listed: true, want: keep},
		{name: "starts", asked: true, obs: obs(running), listed: true, want: started},
		{name: "running again", started: true, asked: true, obs: obs(running), listed: true, want: keep},
		{name: "back in the queue resets the clock", goneSince: time.Second, asked: true, obs: obs(waiting), listed: true, want: keep},
		{name: "stuck", asked: true, obs: obs(stuck), listed: true, want: reject},
		{name: "stuck while removing", removing: true, asked: true, obs: obs(stuck), listed: true, want: keep},
		{name: "running while removing", removing: true, asked: true, obs: obs(running), listed: true, want: keep},
		{name: "ended while removing", removing: true, asked: true, obs: obs(ended), listed: true, want: removed},
		{name: "absent while removing", removing: true, asked: true, want: removed},
		{name: "ended starts the clock", asked: true, obs: obs(ended), listed: true, want: keep, gone: true},
		{name: "absent starts the clock", asked: true, want: keep, gone: true},
		{name: "absent within grace", goneSince: grace - time.Second, asked: true, want: keep, gone: true},
		{name: "absent past grace", goneSince: grace, asked: true, want: lost, gone: true},
		{name: "ended past grace", goneSince: grace + time.Second, asked: true, obs: obs(ended), listed: true, want: lost, gone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &spooled{}
			if tt.started {
				j.started = now.Add(-time.Minute)
			}
			if tt.goneSince > 0 {
				j.goneSince = now.Add(-tt.goneSince)
			}
			if got := judge(j, tt.removing, tt.hasExit, tt.asked, tt.obs, tt.listed, now, grace); got != tt.want {
				t.Errorf("judge = %v, want %v", got, tt.want)
			}
			if tt.asked && !tt.hasExit && !tt.removing && j.goneSince.IsZero() == tt.gone {
				t.Errorf("grace clock running = %v, want %v", !j.goneSince.IsZero(), tt.gone)
			}
			if tt.listed && !tt.hasExit && (!j.seen || j.last != tt.obs) {
				t.Errorf("last observation not kept: %+v", j)
			}
		})
	}
}

func TestParseSqueue(t *testing.T) {
	out := "12|PENDING|Priority\n13|PENDING|PartitionConfig\n14|RUNNING|None\n15|COMPLETING|None\n" +
		"16|CANCELLED|None\n17|TIMEOUT|None\n18|COMPLETED|None\n\ngarbage\n"
	want := map[string]observation{
		"12": {phase: waiting, state: "PENDING", reason: "Priority"},
		"13": {phase: stuck, state: "PENDING", reason: "PartitionConfig"},
		"14": {phase: running, state: "RUNNING"},
		"15": {phase: running, state: "COMPLETING"},
		"16": {phase: ended, state: "CANCELLED"},
		"17": {phase: ended, state: "TIMEOUT", timeLimit: true},
		"18": {phase: ended, state: "COMPLETED"},
	}
	got := parseSqueue(out)
	if len(got) != len(want) {
		t.Errorf("parsed %d jobs, want %d: %+v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s: %+v, want %+v", id, got[id], w)
		}
	}
	if o := slurmObservation("CANCELLED by 0", ""); o.phase != ended {
		t.Errorf("sacct's CANCELLED by 0: %+v", o)
	}
}

func TestParseQstat(t *testing.T) {
	out := `job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID 
-----------------------------------------------------------------------------------------------------------------
      6 0.50000 big        root         qw    11/22/2026 06:17:02                                 1000        
      7 0.25000 bad        root         Eqw   11/22/2026 06:17:02                                    1        
      8 0.55500 run        root         r     11/22/2026 06:17:03 all.q@vm                           1        
      9 0.55500 del        root         dr    11/22/2026 06:17:03 all.q@vm                           1        
     10 0.55500 held       root         hqw   11/22/2026 06:17:03                                    1        
`
	want := map[string]phase{"6": waiting, "7": stuck, "8": running, "9": running, "10": waiting}
	got := parseQstat(out)
	if len(got) != len(want) {
		t.Errorf("parsed %+v", got)
	}
	for id, p := range want {
		if got[id].phase != p {
			t.Errorf("job %s: %+v, want phase %v", id, got[id], p)
		}
	}

	jout := `==============================================================
job_number:                 6
scheduling info:            cannot run in PE "smp" because it only offers 0 slots
==============================================================
job_number:                 7
error reason          1:      11/22/2026 06:17:02 [0:13217]: error: can't open output file "/nonexist/dir/o": No such file or directory
scheduling info:            Job is in error state
`
	reasons := parseQstatErrors(jout)
	if len(reasons) != 1 || reasons["7"] != `error: can't open output file "/nonexist/dir/o": No such file or directory` {
		t.Errorf("error reasons: %q", reasons)
	}
}

func TestJobName(t *testing.T) {
	tests := map[string]string{
		"":                       "rightsize",
		"align chr1/part 2":      "align_chr1_part_2",
		"7up":                    "j7up",
		"ok-name_1.2":            "ok-name_1.2",
		strings.Repeat("x", 100): strings.Repeat("x", 64),
	}
	for in, want := range tests {
		if got := jobName(in); got != want {
			t.Errorf("jobName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	var all bytes.Buffer
	var tb tailBuffer
	for i := 0; i < 3000; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), i%7) + "\n"
		all.WriteString(line)
		tb.Write([]byte(line))
	}
	tb.Write(bytes.Repeat([]byte("Z"), tailSize+10))
	all.Write(bytes.Repeat([]byte("Z"), tailSize+10))
	tb.Write([]byte("end"))
	all.WriteString("end")
	want := all.Bytes()[all.Len()-tailSize:]
	if !bytes.Equal(tb.Bytes(), want) {
		t.Errorf("tail differs")
	}
}

// The wrapper script is run here by /bin/sh directly, as a batch system
// would run it.
func TestWrapper(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		command string
		env     []string
		code    string
		stdout  string
	}{
		{"exit 5", nil, "5", ""},
		{"exit", nil, "0", ""},
		{`echo "$A|$B"`, []string{"A=x'y z", "B=$(false)"}, "0", "x'y z|$(false)\n"},
		{"exec false", nil, "1", ""},
		{"pwd", nil, "0", dir + "\n"},
	}
	for i, tt := range tests {
		j := &sharedJob{Job: Job{Command: tt.command, Env: tt.env}, dir: dir}
		script := filepath.Join(dir, "w.sh")
		status := filepath.Join(dir, "w.status")
		os.Remove(status)
		if err := os.WriteFile(script, []byte(j.wrapper(status)), 0o755); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command("/bin/sh", script).Output()
		b, err := os.ReadFile(status)
		if err != nil || strings.TrimSpace(string(b)) != tt.code || string(out) != tt.stdout {
			t.Errorf("%d %q: status %q (%v), stdout %q; want %s, %q", i, tt.command, b, err, out, tt.code, tt.stdout)
		}
	}
}

func TestTableKeepsOrder(t *testing.T) {
	tb := newTable()
	if err := tb.add("a", Status{State: Queued}); err != nil {
		t.Fatal(err)
	}
	if err := tb.add("a", Status{State: Queued}); err == nil {
		t.Error("the same ID added twice")
	}
	steps := []struct {
		s    State
		want bool
	}{{Running, true}, {Queued, false}, {Running, false}, {Done, true}, {Failed, false}}
	for _, s := range steps {
		if got := tb.set(Event{ID: "a", Status: Status{State: s.s}}); got != s.want {
			t.Errorf("set(%v) = %v, want %v", s.s, got, s.want)
		}
	}
	if tb.set(Event{ID: "unknown", Status: Status{State: Done}}) {
		t.Error("set of an unknown job accepted")
	}
	for _, want := range []State{Running, Done} {
		if ev := <-tb.out; ev.State != want {
			t.Errorf("event %v, want %v", ev.State, want)
		}
	}
	tb.close()
	if _, ok := <-tb.out; ok {
		t.Error("channel open after close")
	}
	if err := tb.add("b", Status{}); err != ErrClosed {
		t.Errorf("add after close = %v", err)
	}
}
