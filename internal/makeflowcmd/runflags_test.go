package makeflowcmd

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/internal/cmdutil"
)

// TestBatchLogDryRun: with -T dryrun, -L takes the shell script, as
// CCTools writes its dry run to the batch log.
func TestBatchLogDryRun(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\tcat a > b\n"})
	r := mf(t, dir, "-T", "dryrun", "-L", "script.sh", "w.mf")
	if r.code != 0 || strings.Contains(r.out, "cat a > b") {
		t.Fatalf("makeflow -T dryrun -L: %v", r)
	}
	script := readFile(t, filepath.Join(dir, "script.sh"))
	if !strings.HasPrefix(script, "#!/bin/sh\n") || !strings.Contains(script, "echo a > a\n") || !strings.Contains(script, "cat a > b\n") {
		t.Errorf("script.sh:\n%s", script)
	}
	if exists(filepath.Join(dir, "a")) {
		t.Errorf("a dry run ran a rule")
	}
}

// TestBatchLogWorkQueue: with -T wq, -L holds the master's statistics in
// the columns of CCTools' Work Queue log; the last line counts every task
// done.
func TestBatchLogWorkQueue(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\techo a > a\nb: a\n\tcat a > b\n"})
	port := freePort(t)
	m := start(t, dir, nil, "-T", "wq", "-p", port, "-P", "5", "-L", "w.wqlog", "w.mf")
	m.until(t, "listening message", func() bool { return strings.Contains(m.out.String(), "listening for workers on port "+port+".\n") })
	ourWorkers(t, 1, port)
	if r := m.wait(t); r.code != 0 {
		t.Fatalf("makeflow -T wq -L: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "w.wqlog"))), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "# timestamp workers_connected workers_init ") {
		t.Fatalf("w.wqlog:\n%s", strings.Join(lines, "\n"))
	}
	names := strings.Fields(strings.TrimPrefix(lines[0], "# "))
	last := strings.Fields(lines[len(lines)-1])
	if len(last) != len(names) {
		t.Fatalf("%d values for %d columns: %s", len(last), len(names), lines[len(lines)-1])
	}
	for i, name := range names {
		if name == "tasks_done" && last[i] != "2" {
			t.Errorf("the last line says %s tasks done, want 2:\n%s", last[i], strings.Join(lines, "\n"))
		}
	}
}

// TestSubmissionTimeout: a batch system whose sbatch always refuses; -S
// bounds how long makeflow keeps trying before the rule fails, and it
// says so as it goes, as CCTools does.
func TestSubmissionTimeout(t *testing.T) {
	bin := t.TempDir()
	writeFiles(t, bin, map[string]string{
		"sbatch": "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Slurm controller not responding' >&2\nexit 1\n",
		"squeue": "#!/bin/sh\nexit 0\n",
	})
	for _, name := range []string{"sbatch", "squeue"} {
		os.Chmod(filepath.Join(bin, name), 0o755)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	r := start(t, dir, env, "-T", "slurm", "-S", "2", "w.mf").wait(t)
	if r.code != 1 || exists(filepath.Join(dir, "a")) {
		t.Fatalf("makeflow -S 2 with a refusing sbatch: %v", r)
	}
	for _, want := range []string{"couldn't submit batch job, still trying in 1s", "still trying in 2s", "unable to submit the job after 2s", "Slurm controller not responding"} {
		if !strings.Contains(r.out+r.err, want) {
			t.Errorf("makeflow does not say %q: %v", want, r)
		}
	}
	if r := start(t, dir, env, "-T", "slurm", "-S", "0", "w.mf").wait(t); r.code != 1 || strings.Contains(r.out+r.err, "still trying") {
		t.Errorf("makeflow -S 0 tried again: %v", r)
	}
}

// TestMonitorLikeCCTools runs one workflow with --monitor under both
// implementations: the same summary files, named as CCTools' resource
// monitor names them, each a JSON object whose measures we write carry
// CCTools' units, with the rule's command and exit status; our peak memory
// and output size are what the rule used.
func TestMonitorLikeCCTools(t *testing.T) {
	needCCTools(t)
	const wf = "big:\n\thead -c 3000000 /dev/zero > big\nsmall: big\n\thead -c 10 big > small\n"
	var summaries [2]map[string]map[string]any
	for i, program := range []string{binary, cctoolsMakeflow} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"w.mf": wf})
		r := runProgram(t, dir, program, "--monitor", "mon", "w.mf")
		if r.code != 0 {
			t.Fatalf("%s --monitor: %v", program, r)
		}
		if i == 0 && !strings.Contains(r.out, "resources: 2 rules measured: CPU time ") {
			t.Errorf("no resources in the run's summary: %v", r)
		}
		summaries[i] = map[string]map[string]any{}
		entries, _ := os.ReadDir(filepath.Join(dir, "mon"))
		for _, e := range entries {
			var m map[string]any
			if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "mon", e.Name()))), &m); err != nil {
				t.Fatalf("%s: %s: %v", program, e.Name(), err)
			}
			summaries[i][e.Name()] = m
		}
	}
	ours, theirs := summaries[0], summaries[1]
	if len(ours) != 2 || len(theirs) != 2 {
		t.Fatalf("summaries: ours %v, CCTools' %v", slices.Sorted(maps.Keys(ours)), slices.Sorted(maps.Keys(theirs)))
	}
	for name, their := range theirs {
		our, ok := ours[name]
		if !ok {
			t.Errorf("we wrote no %s", name)
			continue
		}
		for key, v := range our {
			tv, ok := their[key]
			if !ok {
				t.Errorf("%s: CCTools has no %q", name, key)
				continue
			}
			if pair, ok := v.([]any); ok {
				if tp, _ := tv.([]any); len(pair) != 2 || len(tp) != 2 || pair[1] != tp[1] {
					t.Errorf("%s: %s = %v, CCTools' %v: not the same unit", name, key, v, tv)
				}
			}
		}
		for _, key := range []string{"command", "exit_status", "exit_type", "category"} {
			if our[key] != their[key] {
				t.Errorf("%s: %s = %v, CCTools' %v", name, key, our[key], their[key])
			}
		}
	}
	big := ours["resource-rule-0.summary"]
	if disk := big["disk"].([]any)[0].(float64); disk != 3 {
		t.Errorf("rule 0 left %v MB, want 3", disk)
	}
	if mem := big["memory"].([]any)[0].(float64); mem < 1 {
		t.Errorf("rule 0 used %v MB of memory", mem)
	}
}

// TestArchiveDirArg: a word after a bare --archive is its directory
// when another names the workflow, wherever the flags are; otherwise it
// is the workflow, as in CCTools, whose --archive takes no value.
func TestArchiveDirArg(t *testing.T) {
	tests := []struct {
		args, want []string
	}{
		{[]string{"--archive", "arch", "wf.mf"}, []string{"--archive=arch", "wf.mf"}},
		{[]string{"-j", "2", "--archive", "arch", "-q", "wf.mf"}, []string{"-j", "2", "--archive=arch", "-q", "wf.mf"}},
		{[]string{"wf.mf", "--archive", "arch"}, []string{"wf.mf", "--archive=arch"}},
		{[]string{"--archive", "wf.mf"}, []string{"--archive", "wf.mf"}},
		{[]string{"--archive"}, []string{"--archive"}},
		{[]string{"--archive=arch", "wf.mf"}, []string{"--archive=arch", "wf.mf"}},
		{[]string{"-c", "--archive", "wf.mf"}, []string{"-c", "--archive", "wf.mf"}},
		{[]string{"-c", "intermediates", "--archive", "wf.mf"}, []string{"-c", "intermediates", "--archive", "wf.mf"}},
		{[]string{"-c", "intermediates", "--archive", "arch", "wf.mf"}, []string{"-c", "intermediates", "--archive=arch", "wf.mf"}},
		// A flag's value or a word after "--" is not --archive.
		{[]string{"-l", "--archive", "arch", "wf.mf"}, []string{"-l", "--archive", "arch", "wf.mf"}},
		{[]string{"--archive", "--", "arch", "wf.mf"}, []string{"--archive", "--", "arch", "wf.mf"}},
		{[]string{"--", "--archive", "wf.mf"}, []string{"--", "--archive", "wf.mf"}},
	}
	flags := newCommand(cmdutil.Streams{}).Flags()
	for _, tt := range tests {
		if got := archiveDirArg(flags, tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("archiveDirArg(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestArchiveValue: --archive bare (or =true) asks for the archive in
// --archive-dir's directory, =DIR in DIR, =false for none; the help shows
// it as a flag whose value may be left out, not pflag's DIR[=" "].
func TestArchiveValue(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--archive"}, archiveBare},
		{[]string{"--archive=true"}, archiveBare},
		{[]string{"--archive=arch"}, "arch"},
		{[]string{"--archive=arch", "--archive=false"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		var r runFlags
		f := pflag.NewFlagSet("makeflow", pflag.ContinueOnError)
		r.define(f)
		if err := f.Parse(tt.args); err != nil || r.archive != tt.want {
			t.Errorf("%q: archive %q (%v), want %q", tt.args, r.archive, err, tt.want)
		}
	}
	var r runFlags
	f := pflag.NewFlagSet("makeflow", pflag.ContinueOnError)
	r.define(f)
	usage := f.FlagUsages()
	if line := regexp.MustCompile(`(?m)^ *--archive .*$`).FindString(usage); !strings.HasPrefix(strings.TrimSpace(line), "--archive  ") {
		t.Errorf("help line %q, want --archive and its usage", line)
	}
}

// TestArchiveDirAlone: a directory after a bare --archive, with no
// workflow after it, is refused with how to say what was meant.
func TestArchiveDirAlone(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Makeflow": "out:\n\ttouch out\n", "arch/.keep": ""})
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--archive", "arch"}, 2, "makeflow: arch is a directory, not a workflow: to keep the archive there, write --archive arch WORKFLOW, or --archive-dir arch\n"},
		{[]string{"arch"}, 1, "makeflow: workflow arch: a directory, not a file\n"},
	}
	for _, tt := range tests {
		if r := mf(t, dir, tt.args...); r.code != tt.code || !strings.HasPrefix(r.err, tt.err) {
			t.Errorf("makeflow %q: %v\nwant exit %d and %q", tt.args, r, tt.code, tt.err)
		}
	}
	if exists(filepath.Join(dir, "out")) {
		t.Error("the workflow ran")
	}
}

// TestArchiveFlags: --archive=DIR (or --archive DIR WORKFLOW) keeps the outputs; after a clean, the
// same workflow takes them from there; a changed input runs its rule again.
// (Debian's CCTools 9.9 is built without the archive: it answers --archive
// with its usage, so there is nothing to compare with.)
func TestArchiveFlags(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(t.TempDir(), "archive")
	writeFiles(t, dir, map[string]string{"w.mf": "out: in\n\techo ran >> runs; tr a-z A-Z < in > out\n", "in": "abc\n"})
	steps := []struct {
		args    []string
		in      string
		archive bool // taken from the archive
	}{
		{[]string{"--archive=" + archive}, "", false},
		{[]string{"--archive-dir", archive, "--archive-read"}, "", true},
		{[]string{"--archive-dir", archive, "--archive-read"}, "xyz\n", false},
		{[]string{"--archive=" + archive}, "xyz\n", false}, // read-only before: not kept then
		{[]string{"--archive", archive}, "xyz\n", true},    // before the workflow: its directory
	}
	for i, st := range steps {
		if st.in != "" {
			writeFiles(t, dir, map[string]string{"in": st.in})
		}
		if r := mf(t, dir, "-c", "w.mf"); r.code != 0 {
			t.Fatalf("clean: %v", r)
		}
		r := mf(t, dir, append(st.args, "w.mf")...)
		if r.code != 0 || strings.Contains(r.out, "outputs taken from the archive") != st.archive {
			t.Errorf("step %d, makeflow %v: %v", i, st.args, r)
		}
		if want := strings.ToUpper(readFile(t, filepath.Join(dir, "in"))); readFile(t, filepath.Join(dir, "out")) != want {
			t.Errorf("step %d: out = %q, want %q", i, readFile(t, filepath.Join(dir, "out")), want)
		}
	}
	if got := readFile(t, filepath.Join(dir, "runs")); got != "ran\nran\nran\n" {
		t.Errorf("the rule ran %d times, want 3", strings.Count(got, "ran"))
	}
	tasks, _ := filepath.Glob(filepath.Join(archive, "tasks", "*", "*", "output_files", "out"))
	if len(tasks) != 2 {
		t.Errorf("the archive holds %d tasks, want 2: %v", len(tasks), tasks)
	}
}

// treeMakeflow is a workflow shaped as CCTools' storage allocation test: a
// root file copied down a binary tree three levels deep, joined back up in
// pairs, every file declared 1 byte; each rule appends to count.out how
// many entries the directory holds as it runs.
func treeMakeflow() string {
	var b strings.Builder
	rule := func(out string, ins ...string) {
		cmd := "echo x | head -c 1 > O; touch count.out"
		if len(ins) > 0 {
			cmd = "cp " + ins[0] + " " + out + "; ls -l | wc -l >> count.out"
		}
		fmt.Fprintf(&b, ".SIZE %s 1\n%s: %s\n\t%s\n", out, out, strings.Join(ins, " "), cmd)
	}
	rule("O")
	sides := []string{"l", "r"}
	for _, x := range sides {
		rule("O_"+x, "O")
	}
	for _, y := range sides {
		for _, x := range sides {
			rule("O_"+x+"_"+y, "O_"+x)
		}
	}
	for _, z := range sides {
		for _, y := range sides {
			for _, x := range sides {
				rule("O_"+x+"_"+y+"_"+z, "O_"+x+"_"+y)
			}
		}
	}
	for _, y := range sides {
		for _, x := range sides {
			rule("T_"+x+"_"+y, "O_"+x+"_"+y+"_l", "O_"+x+"_"+y+"_r")
		}
	}
	rule("T_l", "T_l_l", "T_l_r")
	rule("T_r", "T_r_l", "T_r_r")
	rule("T", "T_l", "T_r")
	return b.String()
}

// TestStorageLikeCCTools runs the tree workflow under both
// implementations: --storage-print reports the same footprint, and
// --storage-type 1 --storage-limit 5 runs the rules in the same order,
// collecting the same files, so that every rule sees as many files.
func TestStorageLikeCCTools(t *testing.T) {
	needCCTools(t)
	var counts, prints [2]string
	for i, program := range []string{binary, cctoolsMakeflow} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"tree.mf": treeMakeflow()})
		if r := runProgram(t, dir, program, "--storage-print", "print.out", "tree.mf"); r.code != 0 {
			t.Fatalf("%s --storage-print: %v", program, r)
		}
		for _, line := range strings.Split(readFile(t, filepath.Join(dir, "print.out")), "\n") {
			if strings.HasPrefix(line, "Base") {
				prints[i] = strings.Join(strings.Fields(line), " ")
			}
		}
		os.Remove(filepath.Join(dir, "print.out"))
		r := runProgram(t, dir, program, "--storage-type", "1", "--storage-limit", "5", "tree.mf")
		if r.code != 0 {
			t.Fatalf("%s --storage-type 1 --storage-limit 5: %v", program, r)
		}
		if i == 0 && !strings.Contains(r.out, "storage: peak 5 bytes (limit 5 bytes, --storage-type min)") {
			t.Errorf("no peak said: %v", r)
		}
		counts[i] = readFile(t, filepath.Join(dir, "count.out"))
	}
	if prints[0] != prints[1] || prints[0] != "Base 5 12 1" {
		t.Errorf("--storage-print: ours %q, CCTools' %q", prints[0], prints[1])
	}
	if counts[0] != counts[1] {
		t.Errorf("files seen by each rule: ours\n%s\nCCTools'\n%s", counts[0], counts[1])
	}
	// Below the least the workflow needs, the run stops with a clear error.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"tree.mf": treeMakeflow()})
	if r := mf(t, dir, "--storage-type", "1", "--storage-limit", "4", "tree.mf"); r.code != 1 || !strings.Contains(r.err, "storage limit of 4 bytes (--storage-type min) reached with nothing running") {
		t.Errorf("--storage-limit 4: %v", r)
	}
	if r := mf(t, dir, "--storage-type", "7", "--storage-limit", "4", "tree.mf"); r.code != 2 {
		t.Errorf("--storage-type 7: %v", r)
	}
}
