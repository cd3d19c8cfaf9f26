package batch_test

// A fake HTCondor, for testing the condor driver where HTCondor cannot be
// installed. The test binary plays condor_submit, condor_q, condor_rm,
// condor_history and condor_hold when it is run under those names (TestMain
// switches on os.Args[0]), so the driver runs real commands with the real
// command lines. The fakes keep the queue and the history as JSON job ads in
// a state directory beside the links, and print what the real commands
// print for the arguments the driver and the tests use:
//
//	condor_submit [-terse] FILE   "C.0 - C.0" with -terse; "ERROR: ..." and exit 1 on errors
//	condor_q -af[:j] ATTR... [ID...]     one line per job: "C.0 v1 v2 ...", "undefined" for unset
//	condor_history -af[:j] ATTR... [ID...]
//	condor_rm ID...               "Job C.0 marked for removal"; "Job C.0 not found", exit 1
//	condor_hold ID...             "Job C.0 held"
//
// A submitted job starts at once (there is no negotiator): a detached
// condor_starter — as in HTCondor, the process that runs a job — opens the
// output and error files, which puts the job on hold if it cannot, runs the
// executable in initialdir, enforces a periodic_remove of the form the
// driver writes, and records the exit code. A file named "down" in the state
// directory makes every command fail as when the schedd is unreachable.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if fake, ok := condorFakes[filepath.Base(os.Args[0])]; ok {
		os.Exit(runFake(fake, os.Args[1:]))
	}
	os.Exit(m.Run())
}

var condorFakes = map[string]func(st *fakeState, args []string) int{
	"condor_submit":  fakeSubmit,
	"condor_q":       func(st *fakeState, args []string) int { return fakeQuery(st, "queue", args) },
	"condor_history": func(st *fakeState, args []string) int { return fakeQuery(st, "history", args) },
	"condor_rm":      func(st *fakeState, args []string) int { return fakeStop(st, args, 3, "via condor_rm (by user root)") },
	"condor_hold":    func(st *fakeState, args []string) int { return fakeStop(st, args, 5, "via condor_hold (by user root)") },
	"condor_starter": fakeStarter,
}

// installFakeCondor links the fakes into a new directory and returns it,
// for Options.Bin.
func installFakeCondor(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name := range condorFakes {
		if err := os.Symlink(self, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"state/queue", "state/history"} {
		if err := os.MkdirAll(filepath.Join(bin, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// fakeAd is a job in the fake's queue or history.
type fakeAd struct {
	Cluster              int
	JobStatus            int
	HoldReason           string `json:",omitempty"`
	RemoveReason         string `json:",omitempty"`
	ExitCode             *int   `json:",omitempty"`
	EnteredCurrentStatus int64
	Pid                  int               // the starter's, which leads the job's process group
	Submit               map[string]string // the submit file's commands, keys in lower case
}

func (a *fakeAd) id() string { return strconv.Itoa(a.Cluster) + ".0" }

// attr returns a job ad attribute as condor_q -af prints it.
func (a *fakeAd) attr(name string) string {
	str := func(s string) string {
		if s == "" {
			return "undefined"
		}
		return s
	}
	switch strings.ToLower(name) {
	case "clusterid":
		return strconv.Itoa(a.Cluster)
	case "procid":
		return "0"
	case "jobstatus":
		return strconv.Itoa(a.JobStatus)
	case "holdreason":
		return str(a.HoldReason)
	case "removereason":
		return str(a.RemoveReason)
	case "exitcode":
		if a.ExitCode == nil {
			return "undefined"
		}
		return strconv.Itoa(*a.ExitCode)
	case "requestcpus":
		return str(a.Submit["request_cpus"])
	case "requestmemory":
		return str(a.Submit["request_memory"])
	case "requestdisk":
		return str(a.Submit["request_disk"])
	case "jobbatchname":
		return str(a.Submit["batch_name"])
	case "periodicremove":
		return str(a.Submit["periodic_remove"])
	case "iwd":
		return str(a.Submit["initialdir"])
	}
	return "undefined"
}

// fakeState is the fake's queue and history, locked for one command.
type fakeState struct {
	dir  string
	lock *os.File
}

func runFake(fake func(*fakeState, []string) int, args []string) int {
	st := &fakeState{dir: filepath.Join(filepath.Dir(os.Args[0]), "state")}
	if _, err := os.Stat(filepath.Join(st.dir, "down")); err == nil {
		fmt.Fprintln(os.Stderr, "ERROR: Can't find address of local schedd")
		return 1
	}
	lock, err := os.OpenFile(filepath.Join(st.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ERROR:", err)
		return 1
	}
	st.lock = lock
	return fake(st, args)
}

func (st *fakeState) locked(f func()) {
	syscall.Flock(int(st.lock.Fd()), syscall.LOCK_EX)
	defer syscall.Flock(int(st.lock.Fd()), syscall.LOCK_UN)
	f()
}

func (st *fakeState) path(where string, cluster int) string {
	return filepath.Join(st.dir, where, strconv.Itoa(cluster)+".json")
}

func (st *fakeState) load(where string, cluster int) (*fakeAd, error) {
	b, err := os.ReadFile(st.path(where, cluster))
	if err != nil {
		return nil, err
	}
	var a fakeAd
	return &a, json.Unmarshal(b, &a)
}

func (st *fakeState) save(where string, a *fakeAd) {
	b, _ := json.Marshal(a)
	tmp := st.path(where, a.Cluster) + ".tmp"
	os.WriteFile(tmp, b, 0o644)
	os.Rename(tmp, st.path(where, a.Cluster))
}

// retire moves a job from the queue to the history, as the schedd does
// once a job has completed or been removed.
func (st *fakeState) retire(a *fakeAd) {
	st.save("history", a)
	os.Remove(st.path("queue", a.Cluster))
}

func (st *fakeState) all(where string) []*fakeAd {
	entries, _ := os.ReadDir(filepath.Join(st.dir, where))
	var ads []*fakeAd
	for _, e := range entries {
		c, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if a, err := st.load(where, c); err == nil {
			ads = append(ads, a)
		}
	}
	sort.Slice(ads, func(i, j int) bool { return ads[i].Cluster < ads[j].Cluster })
	return ads
}

func fakeSubmit(st *fakeState, args []string) int {
	terse := false
	var file string
	for _, a := range args {
		switch {
		case a == "-terse":
			terse = true
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(os.Stderr, "ERROR: fake condor_submit does not know option %s\n", a)
			return 1
		default:
			file = a
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: Can't open \"%s\"  with flags 00 (%v)\n", file, err)
		return 1
	}
	sub := map[string]string{}
	queued := false
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.EqualFold(line, "queue") || strings.HasPrefix(strings.ToLower(line), "queue ") {
			queued = true
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "ERROR: on Line %d of submit file: \nSubmit:0:Unrecognized syntax in submit file. Near: %s\n", n+1, line)
			return 1
		}
		sub[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	exe := sub["executable"]
	if exe == "" {
		fmt.Fprintln(os.Stderr, "ERROR: No 'executable' parameter was provided")
		return 1
	}
	if _, err := os.Stat(exe); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: Executable file %s does not exist\n", exe)
		return 1
	}
	if dir := sub["initialdir"]; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			fmt.Fprintf(os.Stderr, "ERROR: No such directory: %s\n", dir)
			return 1
		}
	}
	if !queued {
		// The real condor_submit submits nothing without a queue command.
		return 0
	}
	var ad *fakeAd
	st.locked(func() {
		next := 1
		if b, err := os.ReadFile(filepath.Join(st.dir, "next")); err == nil {
			next, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		os.WriteFile(filepath.Join(st.dir, "next"), []byte(strconv.Itoa(next+1)), 0o644)
		ad = &fakeAd{Cluster: next, JobStatus: 1, EnteredCurrentStatus: time.Now().Unix(), Submit: sub}
		st.save("queue", ad)
	})
	starter := exec.Command(filepath.Join(filepath.Dir(os.Args[0]), "condor_starter"), strconv.Itoa(ad.Cluster))
	starter.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := starter.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ERROR: starting the job:", err)
		return 1
	}
	starter.Process.Release()
	if terse {
		fmt.Printf("%s - %s\n", ad.id(), ad.id())
	} else {
		fmt.Printf("Submitting job(s).\n1 job(s) submitted to cluster %d.\n", ad.Cluster)
	}
	return 0
}

// fakeStarter runs job args[0]: the process HTCondor calls the starter.
func fakeStarter(st *fakeState, args []string) int {
	cluster, _ := strconv.Atoi(args[0])
	var ad *fakeAd
	var cmd *exec.Cmd
	var hold string
	st.locked(func() {
		var err error
		if ad, err = st.load("queue", cluster); err != nil || ad.JobStatus != 1 {
			ad = nil
			return
		}
		sub := ad.Submit
		files := make([]*os.File, 2)
		for i, key := range []string{"output", "error"} {
			name := sub[key]
			if name == "" {
				name = os.DevNull
			} else if !filepath.IsAbs(name) {
				name = filepath.Join(sub["initialdir"], name)
			}
			if files[i], err = os.Create(name); err != nil {
				hold = fmt.Sprintf("Error from slot1@%s: Failed to open '%s' as standard %s: %v (errno %d)",
					hostname(), name, key, errors.Unwrap(err), errnoOf(err))
				ad.JobStatus, ad.HoldReason, ad.EnteredCurrentStatus = 5, hold, time.Now().Unix()
				st.save("queue", ad)
				return
			}
		}
		cmd = exec.Command(sub["executable"], strings.Fields(sub["arguments"])...)
		cmd.Dir = sub["initialdir"]
		cmd.Stdout, cmd.Stderr = files[0], files[1]
		if err := cmd.Start(); err != nil {
			hold = fmt.Sprintf("Error from slot1@%s: Failed to execute '%s': %v", hostname(), sub["executable"], err)
			ad.JobStatus, ad.HoldReason = 5, hold
			st.save("queue", ad)
			return
		}
		ad.JobStatus, ad.Pid, ad.EnteredCurrentStatus = 2, os.Getpid(), time.Now().Unix()
		st.save("queue", ad)
	})
	if ad == nil || hold != "" {
		return 0
	}
	// periodic_remove as the driver writes it: (JobStatus == 2) &&
	// ((time() - EnteredCurrentStatus) > N).
	if m := regexp.MustCompile(`> (\d+)\)$`).FindStringSubmatch(ad.Submit["periodic_remove"]); m != nil {
		secs, _ := strconv.Atoi(m[1])
		time.AfterFunc(time.Duration(secs)*time.Second+time.Second, func() {
			st.locked(func() {
				if cur, err := st.load("queue", cluster); err == nil && cur.JobStatus == 2 {
					cur.JobStatus = 3
					cur.RemoveReason = "The job attribute PeriodicRemove expression '" + ad.Submit["periodic_remove"] + "' evaluated to TRUE"
					st.retire(cur)
				}
				// The starter leads the job's process group.
				syscall.Kill(-os.Getpid(), syscall.SIGKILL)
			})
		})
	}
	err := cmd.Wait()
	st.locked(func() {
		cur, lerr := st.load("queue", cluster)
		if lerr != nil || cur.JobStatus != 2 {
			return // removed or held meanwhile
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		cur.JobStatus, cur.ExitCode, cur.EnteredCurrentStatus = 4, &code, time.Now().Unix()
		st.retire(cur)
	})
	return 0
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}

// clusterOf parses "C" or "C.0".
func clusterOf(id string) (int, bool) {
	c, proc, _ := strings.Cut(id, ".")
	n, err := strconv.Atoi(c)
	return n, err == nil && (proc == "" || proc == "0")
}

func fakeQuery(st *fakeState, where string, args []string) int {
	var attrs []string
	withID, inAttrs := false, false
	want := map[int]bool{}
	for _, a := range args {
		switch {
		case a == "-af" || a == "-autoformat":
			inAttrs = true
		case a == "-af:j" || a == "-autoformat:j":
			inAttrs, withID = true, true
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(os.Stderr, "fake %s: option %s not supported\n", filepath.Base(os.Args[0]), a)
			return 2
		case inAttrs && !isJobID(a):
			attrs = append(attrs, a)
		default:
			c, ok := clusterOf(a)
			if !ok {
				fmt.Fprintf(os.Stderr, "fake %s: bad job id %s\n", filepath.Base(os.Args[0]), a)
				return 2
			}
			want[c] = true
		}
	}
	if len(attrs) == 0 {
		fmt.Fprintf(os.Stderr, "fake %s: only -af output is supported\n", filepath.Base(os.Args[0]))
		return 2
	}
	var ads []*fakeAd
	st.locked(func() { ads = st.all(where) })
	for _, a := range ads {
		if len(want) > 0 && !want[a.Cluster] {
			continue
		}
		var f []string
		if withID {
			f = append(f, a.id())
		}
		for _, name := range attrs {
			f = append(f, a.attr(name))
		}
		fmt.Println(strings.Join(f, " "))
	}
	return 0
}

func isJobID(s string) bool {
	_, ok := clusterOf(s)
	return ok
}

// fakeStop removes (status 3) or holds (status 5) jobs, killing them if
// they run.
func fakeStop(st *fakeState, args []string, status int, reason string) int {
	rc := 0
	for _, id := range args {
		c, ok := clusterOf(id)
		if !ok {
			fmt.Fprintf(os.Stderr, "Invalid cluster # from %s.\n", id)
			rc = 1
			continue
		}
		st.locked(func() {
			a, err := st.load("queue", c)
			if err != nil {
				fmt.Fprintf(os.Stderr, "Job %d.0 not found\n", c)
				rc = 1
				return
			}
			if a.JobStatus == 2 && a.Pid > 0 {
				syscall.Kill(-a.Pid, syscall.SIGKILL)
			}
			a.JobStatus, a.EnteredCurrentStatus = status, time.Now().Unix()
			if status == 3 {
				a.RemoveReason = reason
				st.retire(a)
				fmt.Printf("Job %d.0 marked for removal\n", c)
			} else {
				a.HoldReason = reason
				st.save("queue", a)
				fmt.Printf("Job %d.0 held\n", c)
			}
		})
	}
	return rc
}
