// Package localworkers runs a real workqueue.Master with real one-core
// `workqueue worker` processes on 127.0.0.1, for the benchmarks that
// measure the two together (bench/capacity, bench/masterscale).
package localworkers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/workqueue"
)

// connectWait is how long the workers may take to connect: a few hundred
// processes starting on two cores take seconds.
const connectWait = 2 * time.Minute

// Run starts a master of cfg (listening on 127.0.0.1, any port) and n
// one-core workers of it, the worker command of the workqueue program
// bin, each in its own directory under a new one in parent. Once all have
// connected it calls do with the master, the workers' processes and that
// directory, for the tasks' outputs; the directory is removed after.
func Run(bin, parent string, cfg workqueue.Config, n int, do func(m *workqueue.Master, workers []*exec.Cmd, dir string) error) error {
	dir, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Addr = "127.0.0.1:0"
	m, err := workqueue.Listen(cfg)
	if err != nil {
		return err
	}
	workers, err := start(bin, m.Port(), n, dir)
	defer func() {
		m.Close() // releases the workers, idle by now, so that they leave their sandboxes clean
		stop(workers)
	}()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(connectWait)
	for m.Stats().WorkersConnected < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d workers connected in %v", m.Stats().WorkersConnected, n, connectWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return do(m, workers, dir)
}

// start starts n one-core workers of the master at port, returning those
// it started also when it fails.
func start(bin string, port, n int, dir string) ([]*exec.Cmd, error) {
	var cmds []*exec.Cmd
	for i := range n {
		wd := filepath.Join(dir, "w"+strconv.Itoa(i))
		if err := os.Mkdir(wd, 0o755); err != nil {
			return cmds, err
		}
		c := exec.Command(bin, "worker", "--cores", "1", "--memory", "100", "--disk", "1000",
			"--idle-timeout", "10m", "--connect-timeout", "1m", "--parent-death", "-i", "0.1s", "-b", "1s", "-s", wd, "127.0.0.1", strconv.Itoa(port))
		if err := c.Start(); err != nil {
			return cmds, fmt.Errorf("starting worker: %w", err)
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// stop kills the workers and waits for them.
func stop(cmds []*exec.Cmd) {
	for _, c := range cmds {
		c.Process.Kill()
	}
	for _, c := range cmds {
		c.Wait()
	}
}

// Counts parses a list of counts, "a,b,c": positive integers separated by
// commas.
func Counts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}
