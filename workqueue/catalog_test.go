package workqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// projectName is unique and short: work_queue_status cuts names at 18.
func projectName(t *testing.T) string {
	return fmt.Sprintf("rs%d", time.Now().UnixNano()%1e9)
}

func runOne(t *testing.T, m *Master, cmd string) *Result {
	t.Helper()
	if _, err := m.Submit(&Task{Command: cmd}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.Wait(ctx)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// advertised returns the record of project's master in the catalog at cat,
// or nil if it lists none (yet).
func advertised(cat, project string) catalog.Record {
	recs, _ := catalog.Query(context.Background(), cat, `type=="wq_master"`)
	for _, m := range catalog.Masters(recs) {
		if m.Project == project {
			return m.Record
		}
	}
	return nil
}

// TestCatalogAdvertising: the master advertises itself; our worker finds it
// by project; CCTools' work_queue_status lists it from our catalog and
// lists its workers when asked directly.
func TestCatalogAdvertising(t *testing.T) {
	cat := testutil.StartCatalog(t)
	project := projectName(t)
	m := startMaster(t, Config{Project: project, Priority: 7, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	startWorker(t, m, worker.Config{Project: project, Catalogs: []string{cat}})
	for i := 0; i < 12; i++ {
		if r := runOne(t, m, "echo "+strconv.Itoa(i)); !r.OK() {
			t.Fatalf("task: %+v", r)
		}
	}
	var rec catalog.Record
	testutil.WaitFor(t, "the catalog to show 12 complete tasks", 10*time.Second, func() bool {
		rec = advertised(cat, project)
		return rec != nil && rec.Int("tasks_complete") >= 12
	})
	if rec.Int("port") != int64(m.Port()) || rec.Int("workers") != 1 || rec.Float("capacity_weighted") < 1 || rec.Int("priority") != 7 {
		t.Errorf("catalog record: %v", rec)
	}

	status := testutil.NeedCCTools(t, "work_queue_status")
	out, err := exec.Command(status, "-C", cat).CombinedOutput()
	if err != nil || !strings.Contains(string(out), project) || !strings.Contains(string(out), strconv.Itoa(m.Port())) {
		t.Errorf("work_queue_status -C %s: %v\n%s", cat, err, out)
	}
	out, err = exec.Command(status, "-W", "127.0.0.1", strconv.Itoa(m.Port())).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "127.0.0.1:") {
		t.Errorf("work_queue_status -W: %v\n%s", err, out)
	}
}

// TestWorkerMovesToNextMaster: a master killed mid-run leaves its worker,
// which finds the project's next master through the catalog.
func TestWorkerMovesToNextMaster(t *testing.T) {
	cat := testutil.StartCatalog(t)
	project := projectName(t)
	first, err := Listen(Config{Addr: "127.0.0.1:0", Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, first, worker.Config{Project: project, Catalogs: []string{cat}})
	runOne(t, first, "true")
	first.Submit(&Task{Command: "sleep 30"}) // killed with the master
	testutil.WaitFor(t, "the task to run", 10*time.Second, func() bool { return first.Stats().TasksRunning == 1 })
	first.Close()

	second := startMaster(t, Config{Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	if r := runOne(t, second, "echo second"); strings.TrimSpace(string(r.Output)) != "second" {
		t.Errorf("second master's task: %+v", r)
	}
}

// TestCCToolsWorkerFindsMasterByProject: work_queue_worker -M through our
// catalog.
func TestCCToolsWorkerFindsMasterByProject(t *testing.T) {
	bin := testutil.NeedCCTools(t, "work_queue_worker")
	cat := testutil.StartCatalog(t)
	project := projectName(t)
	m := startMaster(t, Config{Project: project, Catalogs: []string{cat}, AdvertiseInterval: 100 * time.Millisecond})
	testutil.WaitFor(t, "the catalog to list the master", 10*time.Second, func() bool { return advertised(cat, project) != nil })
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-M", project, "-C", cat, "-t", "60", "-s", t.TempDir(), "--cores", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	if r := runOne(t, m, "echo found"); strings.TrimSpace(string(r.Output)) != "found" {
		t.Errorf("task: %+v", r)
	}
}

// TestCCToolsReadsLargeCatalogAnswers: with several masters the catalog's
// answer passes 2 KB; CCTools 9.9's work_queue_status cannot read a chunked
// HTTP body ("parse error: line 3: missing closing bracket"), so the
// catalog sends a Content-Length.
func TestCCToolsReadsLargeCatalogAnswers(t *testing.T) {
	status := testutil.NeedCCTools(t, "work_queue_status")
	cat := testutil.StartCatalog(t)
	var projects []string
	for i := range 4 {
		// Masters' records as they advertise them, sent over TCP.
		m := startMaster(t, Config{})
		reply := make(chan []byte, 1)
		m.send(evStatus{kind: "catalog", reply: reply})
		rec := decodeRecord(<-reply)
		p := fmt.Sprintf("%s%d", projectName(t), i)
		rec["project"], rec["name"] = p, "127.0.0.1"
		if err := catalog.Send(context.Background(), cat, "tcp", rec); err != nil {
			t.Fatal(err)
		}
		projects = append(projects, p)
	}
	// A TCP update has no answer: Send returns before the catalog has
	// read it.
	testutil.WaitFor(t, "the catalog to list every master", 10*time.Second, func() bool {
		recs, err := catalog.Query(context.Background(), cat, "")
		return err == nil && len(recs) >= len(projects)
	})
	out, err := exec.Command(status, "-C", cat).CombinedOutput()
	for _, p := range projects {
		if err != nil || !strings.Contains(string(out), p) {
			t.Fatalf("work_queue_status -C %s: %v; want every project listed\n%s", cat, err, out)
		}
	}
}

// TestCatalogSeesFirstTasks: a master reports to the catalog at start, when
// it has no tasks, and then once an AdvertiseInterval (an hour here); tasks
// submitted after its first report are reported FirstTasksDelay later, not
// an interval later, the burst submitted meanwhile counted. The catalog
// here is the test's own socket.
func TestCatalogSeesFirstTasks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // Config.FirstTasksDelay
		least time.Duration // the report comes no sooner
	}{
		{"default", 0, time.Second},
		{"set", 1500 * time.Millisecond, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			pc.SetDeadline(time.Now().Add(30 * time.Second))
			report := func() catalog.Record {
				t.Helper()
				buf := make([]byte, 64<<10)
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					t.Fatalf("no catalog report: %v", err)
				}
				var rec catalog.Record
				if err := json.Unmarshal(buf[:n], &rec); err != nil {
					t.Fatal(err)
				}
				return rec
			}
			m := startMaster(t, Config{Project: projectName(t), Catalogs: []string{pc.LocalAddr().String()},
				AdvertiseInterval: time.Hour, FirstTasksDelay: tc.delay})
			if rec := report(); rec.Int("tasks_waiting") != 0 {
				t.Fatalf("first report: %v", rec)
			}
			submitted := time.Now()
			for range 5 {
				if _, err := m.Submit(&Task{Command: "true"}); err != nil {
					t.Fatal(err)
				}
			}
			rec := report()
			if waited := time.Since(submitted); waited < tc.least {
				t.Errorf("the report came %v after the first task, want %v or more", waited, tc.least)
			}
			if rec.Int("tasks_waiting") != 5 {
				t.Errorf("the report after the tasks came shows %d waiting, want 5", rec.Int("tasks_waiting"))
			}
		})
	}
}
