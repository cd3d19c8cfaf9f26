package wq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// inProcessEnv names the environment variable that marks the task of a job
// whose work the submitting process has at hand (batch.Job.Do); its value
// is the key InProcess finds the job by. Other workers ignore it.
const inProcessEnv = "RIGHTSIZE_IN_PROCESS_JOB"

// inProcessJobs are the jobs with work at hand that have not ended, by key.
type inProcessJobs struct {
	nonce string // keys from another master are not ours
	next  atomic.Int64
	jobs  sync.Map // key → *batch.Job
	mu    sync.Mutex
	keyOf map[string]string // job id → key
}

func newInProcessJobs() *inProcessJobs {
	b := make([]byte, 8)
	rand.Read(b)
	return &inProcessJobs{nonce: hex.EncodeToString(b), keyOf: map[string]string{}}
}

// mark registers job, which has Do, and returns the environment entry
// that marks its task.
func (p *inProcessJobs) mark(job *batch.Job) (key, env string) {
	key = p.nonce + "-" + strconv.FormatInt(p.next.Add(1), 10)
	p.jobs.Store(key, job)
	return key, inProcessEnv + "=" + key
}

// submitted records that job id is the one of key.
func (p *inProcessJobs) submitted(id, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keyOf[id] = key
}

// forget drops the job of key, or of job id once it has ended.
func (p *inProcessJobs) forget(id, key string) {
	p.mu.Lock()
	if key == "" {
		key = p.keyOf[id]
	}
	delete(p.keyOf, id)
	p.mu.Unlock()
	p.jobs.Delete(key)
}

// InProcess returns what does, in this process, the work of a task this
// driver submitted for a job that has it at hand (batch.Job.Do), given the
// task as a worker receives it: Do, then the job's outputs copied from its
// directory into the task's sandbox, where the worker collects them as a
// command's. It returns nil for any other task. It is the
// worker.Config.InProcess of a worker in this same process (the master's
// own, in a hybrid run), which so does a job without starting a process,
// loading its function and reading its inputs again.
func (d *Driver) InProcess(spec *wire.TaskSpec) func(ctx context.Context, sandbox string) error {
	key := ""
	for _, e := range spec.Env {
		if v, ok := strings.CutPrefix(e, inProcessEnv+"="); ok {
			key = v
		}
	}
	v, ok := d.inproc.jobs.Load(key)
	if !ok {
		return nil
	}
	job := v.(*batch.Job)
	return func(ctx context.Context, sandbox string) error {
		if err := job.Do(ctx); err != nil {
			return err
		}
		dir := job.Dir
		for _, f := range job.Outputs {
			local, remote, err := shipNames(dir, f)
			if err != nil {
				return err
			}
			// A copy, not a link: the master writes the file it fetches
			// back over local, which the worker's copy must not share.
			if err := copyFile(local, filepath.Join(sandbox, remote)); err != nil {
				return fmt.Errorf("output %s: %w", f.Path, err)
			}
		}
		return nil
	}
}

// copyFile copies the regular file src to dst, making dst's directory.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
