package makeflowcmd

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/makeflow"
)

// containerFlags are CCTools' --docker and --singularity: every rule's
// command runs in a container of the image they name, wherever the rule
// runs.
type containerFlags struct {
	docker, dockerTar, dockerOpt string
	singularity, singularityOpt  string
}

func (c *containerFlags) define(f *pflag.FlagSet) {
	f.StringVar(&c.docker, "docker", "", "run every rule's command in a Docker container of `IMAGE`, with its working directory mounted at /root/worker, as this user")
	f.StringVar(&c.dockerTar, "docker-tar", "", "--docker: load the image from the tar `FILE` (docker save's) first, where the rule runs")
	f.StringVar(&c.dockerOpt, "docker-opt", "", "--docker: more options for docker run (e.g. \"--network none\"), split as a shell would")
	f.StringVar(&c.singularity, "singularity", "", "run every rule's command in a Singularity (or Apptainer) container of `IMAGE`")
	f.StringVar(&c.singularityOpt, "singularity-opt", "", "--singularity: more options for singularity exec, split as a shell would")
}

// check reports flags that cannot work together.
func (c *containerFlags) check() error {
	switch {
	case c.docker != "" && c.singularity != "":
		return cmdutil.Usagef("--docker and --singularity: give one container")
	case c.docker == "" && (c.dockerTar != "" || c.dockerOpt != ""):
		return cmdutil.Usagef("--docker-tar and --docker-opt need --docker IMAGE")
	case c.singularity == "" && c.singularityOpt != "":
		return cmdutil.Usagef("--singularity-opt needs --singularity IMAGE")
	}
	return nil
}

// wrapper returns the wrapper that runs a rule's command in the container,
// or false without one. The command runs under /bin/sh in the container,
// so that its pipes and redirections happen there.
func (c *containerFlags) wrapper() (makeflow.Wrapper, bool) {
	switch {
	case c.docker != "":
		// As CCTools: the rule's directory (its sandbox on a worker) is
		// /root/worker in the container. As this user, so that what the
		// rule makes is the user's, not root's; --docker-opt comes after,
		// to override that.
		run := "docker run --rm -v \"$PWD\":/root/worker -w /root/worker --user \"$(id -u):$(id -g)\" " +
			spaced(c.dockerOpt) + shellWord(c.docker) + " /bin/sh -c []"
		w := makeflow.Wrapper{Command: run}
		if c.dockerTar != "" {
			// One load at a time on a machine, as CCTools does.
			w.Command = "flock /tmp/rightsize-docker.lock docker load -q -i " + shellWord(c.dockerTar) + " >/dev/null && " + run
			w.Inputs = []string{c.dockerTar}
		}
		return w, true
	case c.singularity != "":
		return makeflow.Wrapper{Command: "singularity exec " + spaced(c.singularityOpt) + shellWord(c.singularity) + " /bin/sh -c []"}, true
	}
	return makeflow.Wrapper{}, false
}

// usable reports, before anything runs, whether this machine can run the
// container for the rules that run here: Docker's daemon answers, or
// singularity is installed.
func (c *containerFlags) usable(ctx context.Context) error {
	switch {
	case c.docker != "":
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "docker", "info")
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			why := lastLine(stderr.String())
			if why == "" {
				why = err.Error()
			}
			return fmt.Errorf("--docker: Docker cannot run containers on this machine (docker info: %s)", why)
		}
	case c.singularity != "":
		if _, err := exec.LookPath("singularity"); err != nil {
			return fmt.Errorf("--singularity: singularity is not installed on this machine (%v)", err)
		}
	}
	return nil
}

// spaced returns s followed by a space, or "" for an empty s.
func spaced(s string) string {
	if s = strings.TrimSpace(s); s != "" {
		return s + " "
	}
	return ""
}

// shellWord quotes s as one word for /bin/sh.
func shellWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runsHere reports whether rules of wf run on this machine: all of them
// on the local batch type (a stand-in "cluster" included), LOCAL ones on
// another, some of them in a hybrid run or where placement keeps them
// (here).
func runsHere(wf *makeflow.Workflow, bt batchType, hybrid bool, here []bool) bool {
	if !bt.remote || bt.name == "local" || hybrid {
		return true
	}
	for i, r := range wf.Rules {
		if r.Local || i < len(here) && here[i] {
			return true
		}
	}
	return false
}
