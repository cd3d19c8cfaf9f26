package makeflowcmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// These tests run makeflow with -T wq, slurm, sge and condor against real
// components: rightsize's and CCTools' Work Queue workers started by the
// test, the single-node SLURM and Grid Engine of scripts/slurm.sh and
// scripts/sge.sh, and the fake condor_* commands of batch's
// tests (HTCondor is not packaged for Debian).

// waitTimeout bounds every wait for a remote run; a healthy one takes
// seconds.
const waitTimeout = 2 * time.Minute

// running is a makeflow started in the background.
type running struct {
	cmd      *exec.Cmd
	out, err testutil.SyncBuffer
	done     chan struct{}
	result   result
}

// start runs the makeflow binary in dir in the background, with env added
// to its environment.
func start(t *testing.T, dir string, env []string, args ...string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		err := r.cmd.Wait()
		r.result = result{out: r.out.String(), err: r.err.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			r.result.code = exit.ExitCode()
			if exit.ExitCode() < 0 {
				r.result.code = -1
			}
		}
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// wait waits for the run to end and returns what it printed.
func (r *running) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-r.done:
		return r.result
	case <-time.After(waitTimeout):
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("makeflow did not finish in %v:\n%v", waitTimeout, r.result)
		return result{}
	}
}

// until polls cond every 20 ms until it holds, failing the test after
// waitTimeout or if the run ends first.
func (r *running) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		select {
		case <-r.done:
			t.Fatalf("makeflow ended before %s:\n%v", what, r.result)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v:\n%s\n%s", what, waitTimeout, r.out.String(), r.err.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a TCP port that nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startWQ starts makeflow -T wq in dir on a free port with env and args,
// and returns it with the port, once it listens.
func startWQ(t *testing.T, dir string, env []string, args ...string) (*running, string) {
	t.Helper()
	portFile := filepath.Join(t.TempDir(), "port")
	m := start(t, dir, env, append([]string{"-T", "wq", "-Z", portFile}, args...)...)
	var port string
	m.until(t, "port file", func() bool {
		b, _ := os.ReadFile(portFile)
		port = strings.TrimSpace(string(b))
		return strings.HasSuffix(string(b), "\n")
	})
	return m, port
}

// startWorkers starts n workers, each running argv, and stops them when
// the test ends.
func startWorkers(t *testing.T, n int, argv func(workdir string) []string) {
	t.Helper()
	for range n {
		args := argv(t.TempDir())
		cmd := exec.Command(args[0], args[1:]...)
		var out testutil.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("worker %v said:\n%s", args, out.String())
			}
		})
	}
}

// ourWorkers starts n rightsize workers of one core for the master on port.
func ourWorkers(t *testing.T, n int, port string) {
	startWorkers(t, n, func(dir string) []string {
		return []string{workqueueBinary, "worker", "--cores", "1", "-s", dir, "--min-backoff", "0.1", "--max-backoff", "0.5", "-t", "300", "127.0.0.1", port}
	})
}

// taskStatus asks a Work Queue master for its tasks, as work_queue_status
// -T does.
func taskStatus(t *testing.T, port string) []map[string]any {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "task_status\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b), &tasks); err != nil {
		t.Fatalf("task_status answer %q: %v", b, err)
	}
	return tasks
}

// remoteWorkflow is the workflow most remote tests run. part.1 and part.2
// share ref.fa (cached on Work Queue workers); renamed.out is made under
// a remote name from a renamed input; bad fails with status 3; all is
// LOCAL, and proves it by leaving local.proof here; held waits for the
// file named by HOLD, if any.
const remoteWorkflow = `
.MAKEFLOW CATEGORY align
.MAKEFLOW CORES 1
.MAKEFLOW MEMORY 123
.MAKEFLOW DISK 45
part.1: ref.fa q.1
	wc -c < ref.fa > part.1; cat q.1 >> part.1
part.2: ref.fa q.2
	wc -c < ref.fa > part.2; cat q.2 >> part.2
held: part.1
	while [ -n "$HOLD" ] && [ ! -e "$HOLD" ]; do sleep 0.05; done; cp part.1 held
renamed.out->r: part.2->in
	cat in > r; echo renamed >> r
bad:
	echo boom >&2; exit 3
.MAKEFLOW CATEGORY default
all: held renamed.out
	LOCAL cat held renamed.out > all; touch local.proof
`

// writeRemoteWorkflow writes remoteWorkflow and its inputs into dir; hold
// is exported to the rules as HOLD.
func writeRemoteWorkflow(t *testing.T, dir, hold string) {
	writeFiles(t, dir, map[string]string{
		"Makeflow": "HOLD=" + hold + "\nexport HOLD\n" + remoteWorkflow,
		"ref.fa":   strings.Repeat("ACGT", 1000) + "\n", "q.1": "q1\n", "q.2": "q2\n",
	})
}

// checkRemoteWorkflow checks what a run of remoteWorkflow made and said.
func checkRemoteWorkflow(t *testing.T, dir string, r result) {
	t.Helper()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (bad fails): %v", r.code, r)
	}
	for _, want := range []string{
		"workflow failed: 1 of ",
		"rule 4 (", "Makeflow:16:1) failed: exit status 3",
		"stderr: boom",
	} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	if got, want := readFile(t, filepath.Join(dir, "all")), "4001\nq1\n4001\nq2\nrenamed\n"; got != want {
		t.Errorf("all = %q, want %q", got, want)
	}
	for _, name := range []string{"r", "in", "bad"} {
		if exists(filepath.Join(dir, name)) {
			t.Errorf("%s exists in the workflow directory", name)
		}
	}
	if !exists(filepath.Join(dir, "local.proof")) {
		t.Error("the LOCAL rule did not run on this machine")
	}
	if log := readFile(t, filepath.Join(dir, "Makeflow.makeflowlog")); !strings.Contains(log, "\n# FAILED ") {
		t.Errorf("log does not end in failure:\n%s", log)
	}
}

// TestWorkQueue runs a workflow on two rightsize workers: files shipped,
// renamed and cached, resources and category passed on, a LOCAL rule kept
// here, a failing rule reported with its exit status; then a re-run after
// fixing the failing rule, and clean.
func TestWorkQueue(t *testing.T) {
	dir := t.TempDir()
	hold := filepath.Join(t.TempDir(), "go")
	writeRemoteWorkflow(t, dir, hold)
	port := freePort(t)
	m := start(t, dir, nil, "-T", "wq", "-p", port)
	m.until(t, "listening message", func() bool { return strings.Contains(m.out.String(), "listening for workers on port "+port+".\n") })
	ourWorkers(t, 2, port)

	// The held rule reached a worker with its declared resources.
	var task map[string]any
	m.until(t, "held rule running", func() bool {
		for _, tk := range taskStatus(t, port) {
			if strings.Contains(fmt.Sprint(tk["command"]), "cp part.1 held") && tk["state"] == "running" {
				task = tk
				return true
			}
		}
		return false
	})
	for key, want := range map[string]any{"category": "align", "cores": 1.0, "memory": 123.0, "disk": 45.0} {
		if task[key] != want {
			t.Errorf("task %s = %v, want %v (task %v)", key, task[key], want, task)
		}
	}
	if err := os.WriteFile(hold, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	checkRemoteWorkflow(t, dir, m.wait(t))

	// Fix the failing rule: only it runs again.
	src := strings.Replace(readFile(t, filepath.Join(dir, "Makeflow")), "echo boom >&2; exit 3", "touch bad", 1)
	writeFiles(t, dir, map[string]string{"Makeflow": src})
	r := runMakeflow(t, dir, "-T", "wq", "-p", port)
	if r.code != 0 || !strings.Contains(r.out, "5 of 6 rules already done") || !strings.Contains(r.out, "1 rule ran") {
		t.Fatalf("re-run: %v", r)
	}
	if r := runMakeflow(t, dir, "-c"); r.code != 0 || exists(filepath.Join(dir, "all")) || exists(filepath.Join(dir, "renamed.out")) {
		t.Errorf("clean: %v", r)
	}
}

// runMakeflow runs makeflow in dir to its end.
func runMakeflow(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return start(t, dir, nil, args...).wait(t)
}

// TestWorkQueueKill9 kills makeflow -T wq with SIGKILL in the middle of a
// run; the workers stay, and a re-run on the same port finishes the work
// without redoing what the log shows complete.
func TestWorkQueueKill9(t *testing.T) {
	dir := t.TempDir()
	// The workers run on this machine, so the commands can note in the
	// workflow directory that they ran.
	c := writeChains(t, dir, filepath.Join(dir, "runs"), false)
	port := freePort(t)
	ourWorkers(t, 2, port)
	m := start(t, dir, nil, "-T", "wq", "-p", port)
	m.until(t, "four rules complete", func() bool { return len(c.complete()) >= 4 })
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-m.done
	doneBefore := c.killed(t)
	c.checkRecovered(t, runMakeflow(t, dir, "-T", "wq", "-p", port), doneBefore)
}

// TestWorkQueueCCToolsWorkers runs the workflow on two of Debian's CCTools
// work_queue_workers.
func TestWorkQueueCCToolsWorkers(t *testing.T) {
	wqw := testutil.NeedCCTools(t, "work_queue_worker")
	dir := t.TempDir()
	writeRemoteWorkflow(t, dir, "")
	m, port := startWQ(t, dir, nil)
	startWorkers(t, 2, func(dir string) []string {
		return []string{wqw, "--cores", "1", "-s", dir, "-t", "300", "127.0.0.1", port}
	})
	checkRemoteWorkflow(t, dir, m.wait(t))
}

func TestRemoteUsageErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-T", "slurm", "-p", "9000", "w.mf"}, "--port is for the Work Queue master of -T wq, not -T slurm"},
		{[]string{"-T", "local", "--password", "pw", "w.mf"}, "--password is for the Work Queue master of -T wq, not -T local"},
		{[]string{"-T", "slurm", "--ssl-cert", "c", "--ssl-key", "k", "w.mf"}, "--ssl-cert is for the Work Queue master of -T wq, not -T slurm"},
		{[]string{"-T", "wq", "--ssl-cert", "c", "w.mf"}, "--ssl-cert and --ssl-key go together"},
		{[]string{"-T", "wq", "-p", "0", "--password", "missing.pw", "w.mf"}, "makeflow: --password: missing.pw: no such file or directory"},
		{[]string{"-T", "wq", "-p", "0", "--ssl-cert", "c", "--ssl-key", "k", "w.mf"}, "makeflow: --ssl-cert: TLS certificate: "},
		{[]string{"-T", "wq", "-B", "--exclusive", "w.mf"}, "-B is for -T slurm, sge or condor, not -T wq"},
		{[]string{"-T", "wq", "--shared-fs", "data", "w.mf"}, "--shared-fs data: must be an absolute path"},
		{[]string{"-T", "wq", "-F", "0.5", "w.mf"}, "-F 0.5: the fast-abort multiplier must be at least 1"},
		{[]string{"-T", "wq", "-p", "70000", "w.mf"}, "-p 70000: not a port number"},
		{[]string{"-T", "wq", "-a", "w.mf"}, "-a advertises the master under a project name: give -N NAME"},
		{[]string{"-T", "local", "-a", "w.mf"}, "--advertise is for the Work Queue master of -T wq, not -T local"},
		{[]string{"--hybrid", "w.mf"}, "--hybrid makes this machine's cores take rules beside those of -T TYPE: give -T"},
		{[]string{"-T", "local", "--hybrid", "w.mf"}, "--hybrid: -T local runs every rule here already"},
		{[]string{"--report", "no/such/dir/r.html", "w.mf"}, "makeflow: --report no/such/dir/r.html: directory no/such/dir does not exist\n"},
		{[]string{"--http", "localhost", "w.mf"}, `--http "localhost": not an address: give :PORT, or HOST:PORT`},
	}
	for _, tt := range tests {
		r := mf(t, dir, tt.args...)
		if r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("makeflow %q: want exit 2 and %q, got %v", tt.args, tt.want, r)
		}
	}
	if exists(filepath.Join(dir, "a")) {
		t.Error("a usage error ran something")
	}
}

// TestMissingBatchSystem: without the batch system's commands, makeflow
// says so once, before running anything.
func TestMissingBatchSystem(t *testing.T) {
	if _, err := exec.LookPath("condor_submit"); err == nil {
		t.Skip("HTCondor is installed here")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "a:\n\ttouch a\n"})
	r := mf(t, dir, "-T", "condor", "w.mf")
	if r.code != 1 || !strings.Contains(r.err, "-T condor: condor_submit is not in PATH; is HTCondor installed here?") || exists(filepath.Join(dir, "a")) {
		t.Errorf("makeflow -T condor without HTCondor: %v", r)
	}
}

// TestWorkQueueRefusesAbsolutePaths: Work Queue workers cannot reach a
// file by its absolute name, so such a workflow is refused before any
// master starts, with the file's position, unless the file is renamed or
// declared on a shared filesystem.
func TestWorkQueueRefusesAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	shared := t.TempDir()
	abs := filepath.Join(shared, "ref.fa")
	writeFiles(t, dir, map[string]string{
		"w.mf": "out: in " + abs + "\n\tcat in " + abs + " > out\n",
		"in":   "in\n",
	})
	if err := os.WriteFile(abs, []byte("ref\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	want := "w.mf:1:9: " + abs + ": a rule that runs remotely runs in a sandbox of its own"
	for _, args := range [][]string{{"--check", "-T", "wq", "w.mf"}, {"-T", "wq", "-p", "0", "w.mf"}} {
		r := mf(t, dir, args...)
		if r.code != 1 || !strings.Contains(r.err, want) || !strings.Contains(r.err, "1 error in w.mf; nothing was run") ||
			strings.Contains(r.out, "listening") {
			t.Errorf("makeflow %q: want exit 1 and %q, got %v", args, want, r)
		}
	}
	for _, args := range [][]string{{"--check", "-T", "local", "w.mf"}, {"--check", "-T", "slurm", "w.mf"}, {"--check", "-T", "wq", "--shared-fs", shared, "w.mf"}} {
		if r := mf(t, dir, args...); r.code != 0 {
			t.Errorf("makeflow %q: %v", args, r)
		}
	}

	// With the directory declared shared, the file is used in place.
	port := freePort(t)
	ourWorkers(t, 1, port)
	if r := mf(t, dir, "-T", "wq", "-p", port, "--shared-fs", shared, "w.mf"); r.code != 0 || readFile(t, filepath.Join(dir, "out")) != "in\nref\n" {
		t.Errorf("run with --shared-fs: %v", r)
	}
}

// TestSlurm runs the workflow on the local SLURM, one batch job per rule,
// and checks that SLURM gave the jobs the declared cores and memory.
func TestSlurm(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	dir := t.TempDir()
	writeRemoteWorkflow(t, dir, "")
	appendRule(t, dir, ".MAKEFLOW CATEGORY align\nres:\n\techo $$SLURM_CPUS_PER_TASK $$SLURM_MEM_PER_NODE $$SLURM_JOB_NAME > res\n")
	checkRemoteWorkflow(t, dir, runMakeflow(t, dir, "-T", "slurm"))
	if got := readFile(t, filepath.Join(dir, "res")); got != "1 123 makeflow-6\n" {
		t.Errorf("the job saw cores, memory and name %q, want 1 123 makeflow-6", got)
	}
	checkNoSpool(t, dir)
}

// TestSGE runs the workflow on the local Grid Engine and checks the
// declared memory and wall time reached the job's limits.
func TestSGE(t *testing.T) {
	testutil.NeedBatchSystem(t, "sge")
	dir := t.TempDir()
	writeRemoteWorkflow(t, dir, "")
	appendRule(t, dir, ".MAKEFLOW CATEGORY align\nres:\nWALL_TIME=120\n\tulimit -v > res; qstat -j $$JOB_ID | grep -o 'h_rt=[0-9]*' >> res\n")
	checkRemoteWorkflow(t, dir, runMakeflow(t, dir, "-T", "sge"))
	// h_vmem is 123 MB per slot, which Grid Engine enforces as the
	// job's virtual memory limit (in kB).
	if got := readFile(t, filepath.Join(dir, "res")); got != "125952\nh_rt=120\n" {
		t.Errorf("the job's limits: %q, want 125952 kB of memory and h_rt=120", got)
	}
	checkNoSpool(t, dir)
}

// TestCondor runs the workflow on the fake condor_* commands of
// batch's tests: the test binary of that package plays them
// when run under their names, keeping their queue in ./state. So makeflow
// runs where the fakes are, on the workflow in another directory (-X).
func TestCondor(t *testing.T) {
	bin := testutil.FakeCondor(t)
	dir := t.TempDir()
	writeRemoteWorkflow(t, dir, "")
	r := start(t, bin, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, "-T", "condor", "-X", dir).wait(t)
	checkRemoteWorkflow(t, dir, r)
	checkNoSpool(t, dir)
}

// appendRule adds text to the Makeflow in dir.
func appendRule(t *testing.T, dir, text string) {
	t.Helper()
	path := filepath.Join(dir, "Makeflow")
	writeFiles(t, dir, map[string]string{"Makeflow": readFile(t, path) + text})
}

// checkNoSpool checks that the batch driver removed its spool directory
// and that no sandbox was left behind.
func checkNoSpool(t *testing.T, dir string) {
	t.Helper()
	for _, pattern := range []string{".rightsize-*", ".makeflow-sandbox-*"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
}

// TestSlurmInterrupt interrupts makeflow -T slurm while a rule runs: the
// job is removed from SLURM, and the run ends as interrupted.
func TestSlurmInterrupt(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Makeflow": "a:\n\ttouch a\nb: a\n\tsleep 300; touch b\n"})
	m := start(t, dir, nil, "-T", "slurm")
	var jobID string
	m.until(t, "b running", func() bool {
		for _, line := range strings.Split(readLog(dir), "\n") {
			if f := strings.Fields(line); len(f) == 10 && f[1] == "1" && f[2] == "1" {
				jobID = f[3]
				return true
			}
		}
		return false
	})
	m.cmd.Process.Signal(os.Interrupt)
	if r := m.wait(t); r.code != 130 || !strings.Contains(r.err, "interrupted with 1 of 2 rules done") {
		t.Errorf("interrupted run: %v", r)
	}
	out, _ := exec.Command("squeue", "--noheader", "--jobs="+jobID, "--format=%T").CombinedOutput()
	if state := strings.TrimSpace(string(out)); state != "" && !strings.Contains(state, "CANCELLED") && !strings.Contains(state, "Invalid job id") {
		t.Errorf("SLURM job %s is %q after the interrupt", jobID, state)
	}
	checkNoSpool(t, dir)
}

// TestWorkQueueProjectAndPassword: a master advertised under a project name
// (-N) to a catalog (-C) is found by a worker started with -M, and serves it
// only with the right password.
func TestWorkQueueProjectAndPassword(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "out:\n\techo served > out\n", "pw": "sesame\n", "wrong": "open\n"})
	catalogFile := filepath.Join(t.TempDir(), "catalog.port")
	startWorkers(t, 1, func(string) []string {
		return []string{workqueueBinary, "catalog", "-p", "0", "-Z", catalogFile}
	})
	var catalog string
	deadline := time.Now().Add(waitTimeout)
	for {
		b, _ := os.ReadFile(catalogFile)
		if catalog = strings.TrimSpace(string(b)); strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the catalog server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	catalog = "127.0.0.1:" + catalog
	project := "mftest-" + strconv.Itoa(os.Getpid())
	m := start(t, dir, nil, "-T", "wq", "-p", "0", "-N", project, "-C", catalog, "--password", "pw", "w.mf")
	worker := func(password string) func(string) []string {
		return func(workdir string) []string {
			return []string{workqueueBinary, "worker", "-M", project, "-C", catalog, "--password", filepath.Join(dir, password),
				"-s", workdir, "--min-backoff", "0.1", "--max-backoff", "0.5", "-t", "300"}
		}
	}
	startWorkers(t, 1, worker("wrong"))
	// Refused workers are reported without -d, with their address.
	m.until(t, "refused worker reported", func() bool {
		e := m.err.String()
		return strings.Contains(e, "refused connection") && strings.Contains(e, "from=127.0.0.1:")
	})
	if exists(filepath.Join(dir, "out")) {
		t.Fatal("a worker with the wrong password ran a rule")
	}
	startWorkers(t, 1, worker("pw"))
	r := m.wait(t)
	if r.code != 0 || readFile(t, filepath.Join(dir, "out")) != "served\n" {
		t.Errorf("run: %v", r)
	}
	if !strings.Contains(r.err, "makeflow: warning: password file pw can be read by others (permissions 0644)") {
		t.Errorf("no warning about a password file others can read:\n%s", r.err)
	}
}

// TestWorkQueueTLS: with --ssl-cert and --ssl-key, workers connect over
// TLS; one started with --ssl-ca and the password is served, one without
// TLS is refused and reported.
func TestWorkQueueTLS(t *testing.T) {
	cert, key := testutil.SelfSignedCert(t, "master")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"w.mf": "out:\n\techo secret > out\n", "pw": "sesame\n"})
	os.Chmod(filepath.Join(dir, "pw"), 0o600)
	port := freePort(t)
	m := start(t, dir, nil, "-T", "wq", "-p", port, "--password", "pw", "--ssl-cert", cert, "--ssl-key", key, "w.mf")
	m.until(t, "listening message", func() bool { return strings.Contains(m.out.String(), "listening for workers on port "+port+".\n") })
	worker := func(extra ...string) func(string) []string {
		return func(workdir string) []string {
			return append([]string{workqueueBinary, "worker", "--password", filepath.Join(dir, "pw"), "-s", workdir,
				"--min-backoff", "0.1", "--max-backoff", "0.5", "-t", "300", "127.0.0.1", port}, extra...)
		}
	}
	startWorkers(t, 1, worker())
	m.until(t, "plain worker refused", func() bool { return strings.Contains(m.err.String(), "TLS handshake failed") })
	startWorkers(t, 1, worker("--ssl-ca", cert))
	r := m.wait(t)
	if r.code != 0 || readFile(t, filepath.Join(dir, "out")) != "secret\n" {
		t.Errorf("run: %v", r)
	}
	if strings.Contains(r.err, "warning") {
		t.Errorf("warnings with a private password file and key:\n%s", r.err)
	}
}

// TestCCToolsHabits: what CCTools users' scripts pass keeps working: -Z
// with another -T than wq (ignored, as CCTools ignores it), a workflow
// whose rules are all LOCAL under -T slurm where SLURM is not installed,
// and the clean mode given apart ("-c intermediates wf.mf").
func TestCCToolsHabits(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"w.mf":     "a:\n\ttouch a\n",
		"local.mf": "b:\n\tLOCAL echo b > b\n",
		"two.mf":   "mid: \n\techo m > mid\nout: mid\n\tcat mid > out\n",
	})
	if r := mf(t, dir, "-T", "local", "-Z", "port", "w.mf"); r.code != 0 || !exists(filepath.Join(dir, "a")) || exists(filepath.Join(dir, "port")) {
		t.Errorf("makeflow -T local -Z port: %v", r)
	}

	cmd := exec.Command(binary, "-T", "slurm", "local.mf")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir()) // no sbatch, no anything
	if out, err := cmd.CombinedOutput(); err != nil || !exists(filepath.Join(dir, "b")) {
		t.Errorf("makeflow -T slurm on LOCAL rules without SLURM: %v\n%s", err, out)
	}

	if r := mf(t, dir, "two.mf"); r.code != 0 {
		t.Fatalf("two.mf: %v", r)
	}
	if r := mf(t, dir, "-c", "intermediates", "two.mf"); r.code != 0 || exists(filepath.Join(dir, "mid")) || !exists(filepath.Join(dir, "out")) {
		t.Errorf("makeflow -c intermediates two.mf: %v; want mid gone, out kept", r)
	}
	if r := mf(t, dir, "-c", "sideways", "two.mf"); r.code != 2 {
		t.Errorf("makeflow -c sideways two.mf: %v; want a usage error", r)
	}
}

// TestWorkQueueDirectoryOutputs: a rule whose outputs are a directory and
// files in it, one named with a space, comes back whole from either
// worker (ours failed on the files listed apart; a CCTools worker sends
// the spaced name unencoded, and our master dropped it).
func TestWorkQueueDirectoryOutputs(t *testing.T) {
	// Each takes its subtest's t: a missing CCTools skips only its own.
	workers := map[string]func(t *testing.T, port string) func(string) []string{
		"rightsize": func(_ *testing.T, port string) func(string) []string {
			return func(dir string) []string {
				return []string{workqueueBinary, "worker", "--cores", "1", "-s", dir, "-t", "300", "127.0.0.1", port}
			}
		},
		"cctools": func(t *testing.T, port string) func(string) []string {
			wqw := testutil.NeedCCTools(t, "work_queue_worker")
			return func(dir string) []string {
				return []string{wqw, "--cores", "1", "-s", dir, "-t", "300", "127.0.0.1", port}
			}
		},
	}
	for name, worker := range workers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"w.mf": "mydir mydir/1.txt:\n\tmkdir -p mydir && echo one > mydir/1.txt && echo two > \"mydir/a b.txt\"\n",
			})
			m, port := startWQ(t, dir, nil, "w.mf")
			startWorkers(t, 1, worker(t, port))
			if r := m.wait(t); r.code != 0 {
				t.Fatalf("makeflow: %v", r)
			}
			for file, want := range map[string]string{"mydir/1.txt": "one\n", "mydir/a b.txt": "two\n"} {
				if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v", file, b, err)
				}
			}
		})
	}
}

// TestCCToolsRunFlags: -z, --do-not-save-failed-output, -f, -d with -o,
// -v and --wait-for-files-upto do what they do in CCTools.
func TestCCToolsRunFlags(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"empty.mf": "out:\n\ttrue > out\n",
		"ok.mf":    "a:\n\techo a > a\nb: a\n\tcat a a > b\n",
		"late.mf":  "late:\n\techo done > done.fifo\n",
	})
	if r := mf(t, dir, "-z", "--do-not-save-failed-output", "empty.mf"); r.code != 1 || !strings.Contains(r.err, "left out empty (-z)") ||
		exists(filepath.Join(dir, "out")) || exists(filepath.Join(dir, "makeflow.failed.0")) {
		t.Errorf("makeflow -z --do-not-save-failed-output: %v", r)
	}
	if r := mf(t, dir, "-f", "summary.txt", "-d", "all", "-o", "debug.log", "ok.mf"); r.code != 0 {
		t.Fatalf("makeflow -f -d -o: %v", r)
	}
	sum, _ := os.ReadFile(filepath.Join(dir, "summary.txt"))
	for _, want := range []string{"Workflow completed:", "Number of tasks:\t 2", "Completed tasks:\t 2/2", "Output files:\n\tb\t4\n"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "debug.log")); !strings.Contains(string(b), "level=DEBUG") {
		t.Errorf("debug.log holds %q", b)
	}
	if r := mf(t, dir, "-v"); r.code != 0 || !strings.HasPrefix(r.out, "makeflow version") {
		t.Errorf("makeflow -v: %v", r)
	}
	// --wrapper runs every command through the wrapper, with its files.
	writeFiles(t, dir, map[string]string{"w.sh": "#!/bin/sh\necho wrapped >> wrap.%s\nexec \"$@\"\n"})
	os.Chmod(filepath.Join(dir, "w.sh"), 0o755)
	os.Remove(filepath.Join(dir, "ok.mf.makeflowlog"))
	if r := mf(t, dir, "--wrapper", "./w.sh /bin/sh -c []", "--wrapper-input", "w.sh", "ok.mf"); r.code != 0 {
		t.Fatalf("makeflow --wrapper: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "wrap.%s")); string(b) != "wrapped\nwrapped\n" {
		t.Errorf("the wrapper ran %q times, want twice", b)
	}
	// An output that shows up after its command ended, as on a slow
	// shared filesystem: the command says it is done through a fifo, and
	// only then does the file appear.
	fifo := filepath.Join(dir, "done.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	appeared := make(chan struct{})
	go func() {
		defer close(appeared)
		if b, err := os.ReadFile(fifo); err == nil && len(b) > 0 {
			os.WriteFile(filepath.Join(dir, "late"), []byte("x"), 0o644)
		}
	}()
	defer func() {
		// Let the reader go should the command never have written.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-appeared
	}()
	if r := mf(t, dir, "--wait-for-files-upto", "20", "late.mf"); r.code != 0 {
		t.Errorf("makeflow --wait-for-files-upto 20: %v", r)
	}
}

// TestSendEnvironment: a Work Queue task gets the exported variables only,
// unless --send-environment gives it makeflow's whole environment.
func TestSendEnvironment(t *testing.T) {
	for _, send := range []bool{false, true} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"w.mf": "out:\n\techo \"[$$RIGHTSIZE_SENT]\" > out\n"})
		args := []string{"w.mf"}
		if send {
			args = append([]string{"--send-environment"}, args...)
		}
		m, port := startWQ(t, dir, []string{"RIGHTSIZE_SENT=yes"}, args...)
		ourWorkers(t, 1, port)
		if r := m.wait(t); r.code != 0 {
			t.Fatalf("makeflow %v: %v", args, r)
		}
		want := "[]\n"
		if send {
			want = "[yes]\n"
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "out")); string(b) != want {
			t.Errorf("--send-environment %v: the task saw %q, want %q", send, b, want)
		}
	}
}
