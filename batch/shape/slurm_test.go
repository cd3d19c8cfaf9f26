package shape_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/internal/testutil"
)

// TestSlurmChoose asks the real SLURM where candidates would start (when
// it runs no other test's job: they share it): on its idle node a job of all the cores for 2 minutes finishes before one
// core for 4; once a job holds all cores but one for 5 minutes, the one
// core for 4 minutes, which starts at once, finishes first.
func TestSlurmChoose(t *testing.T) {
	testutil.NeedBatchSystem(t, "slurm")
	out, err := exec.Command("sinfo", "--noheader", "--format=%c").Output()
	if err != nil {
		t.Fatal(err)
	}
	cores, err := strconv.Atoi(strings.Fields(string(out))[0])
	if err != nil || cores < 2 {
		t.Skipf("skipping: needs a SLURM node of 2 cores or more (sinfo says %q)", out)
	}
	ctx := context.Background()
	s := shape.Slurm{}
	cands := []shape.Shape{{Cores: 1, Wall: 4 * time.Minute}, {Cores: cores, Wall: 2 * time.Minute}, {Cores: cores + 1, Wall: time.Minute}}
	// Other packages' tests share this SLURM: ask when it runs nothing,
	// again if a job came meanwhile.
	var c shape.Choice
	for try := 0; ; try++ {
		waitIdle(t, "")
		c, err = s.Choose(ctx, cands)
		if err == nil && c.Index == 1 || try == 5 || !busy(t, "") {
			break
		}
	}
	if err != nil || c.Index != 1 {
		t.Fatalf("idle: chose %+v, %v; want all %d cores for 2 minutes", c, err, cores)
	}
	if _, err := s.Start(ctx, cands[2]); err == nil {
		t.Errorf("a job of %d cores on a node of %d: SLURM predicted a start", cores+1, cores)
	}

	started := filepath.Join(t.TempDir(), "started")
	blocker, err := exec.Command("sbatch", "--parsable", "--job-name=shape-blocker", "--cpus-per-task="+strconv.Itoa(cores-1),
		"--time=5", "--output=/dev/null", "--wrap=echo started > "+started+"; sleep 300").Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(blocker))
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	// Until it runs, the prediction would be of an idle node.
	testutil.WaitLine(t, started)
	for try := 0; ; try++ {
		waitIdle(t, id)
		c, err = s.Choose(ctx, cands)
		if err == nil && c.Index == 0 && c.Start <= 10*time.Second || try == 5 || !busy(t, id) {
			break
		}
	}
	if err != nil || c.Index != 0 || c.Start > 10*time.Second {
		t.Errorf("busy: chose %+v, %v; want one core for 4 minutes, at once", c, err)
	}
}

// busy reports whether SLURM has a job queued or running but job mine.
func busy(t *testing.T, mine string) bool {
	t.Helper()
	out, err := exec.Command("squeue", "--noheader", "--format=%i").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(out)) {
		if id != mine {
			return true
		}
	}
	return false
}

// waitIdle returns once SLURM runs no job but job mine, failing the test
// after 5 minutes.
func waitIdle(t *testing.T, mine string) {
	t.Helper()
	testutil.WaitFor(t, "SLURM to become idle", 5*time.Minute, func() bool { return !busy(t, mine) })
}
