package makeflowcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeContainers puts docker and singularity commands first in PATH that
// do what the real ones would for makeflow's rules, without containers
// (this machine has no Docker daemon to test with): "docker run ... -v
// DIR:/root/worker ... IMAGE /bin/sh -c CMD" runs CMD in DIR, and
// "singularity exec IMAGE /bin/sh -c CMD" runs CMD where it is. Each call
// is logged, one line of arguments, to the returned file. With down set,
// "docker info" fails as it does when the daemon is not running.
func fakeContainers(t *testing.T, down bool) (log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(bin, "calls")
	info := "exit 0"
	if down {
		info = `echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1`
	}
	docker := `#!/bin/sh
echo "docker $*" >> ` + log + `
case "$1" in
info) ` + info + ` ;;
load) exit 0 ;;
run)
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		-v) dir=${2%%:*}; shift 2 ;;
		-w|--user|--network) shift 2 ;;
		--rm) shift ;;
		/bin/sh) shift; break ;;
		*) shift ;;
		esac
	done
	cd "$dir" && exec /bin/sh "$@" ;;
esac
`
	singularity := `#!/bin/sh
echo "singularity $*" >> ` + log + `
[ "$1" = exec ] || exit 2
while [ "$1" != /bin/sh ]; do shift; done
shift
exec /bin/sh "$@"
`
	for name, script := range map[string]string{"docker": docker, "singularity": singularity} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// TestContainers: --docker and --singularity run each rule's command,
// pipes and all, in a container of the image (through fakes of the two
// commands), under --wrapper's; --docker-tar loads the image first and is
// an input of every rule.
func TestContainers(t *testing.T) {
	const wf = "out.txt: in.txt\n\tcat in.txt | tr a-z A-Z > out.txt\n"
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string // in the fakes' log
	}{
		{"docker", []string{"--docker", "alpine:3", "--docker-opt", "--network none"},
			[]string{"docker info", `-w /root/worker --user `, "--network none alpine:3 /bin/sh -c cat in.txt | tr a-z A-Z > out.txt"}},
		{"docker tar", []string{"--docker", "mine", "--docker-tar", "mine.tar"},
			[]string{"docker load -q -i mine.tar", "mine /bin/sh -c cat in.txt"}},
		{"singularity", []string{"--singularity", "img.sif", "--wrapper", "env X=1 {}"},
			[]string{"singularity exec img.sif /bin/sh -c cat in.txt | tr a-z A-Z > out.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := fakeContainers(t, false)
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.mf": wf, "in.txt": "hello\n", "mine.tar": "an image"})
			r := mf(t, dir, append(tc.flags, "wf.mf")...)
			if r.code != 0 || readFile(t, filepath.Join(dir, "out.txt")) != "HELLO\n" {
				t.Fatalf("run: %v", r)
			}
			calls, _ := os.ReadFile(log)
			for _, w := range tc.want {
				if !strings.Contains(string(calls), w) {
					t.Errorf("the container commands lack %q:\n%s", w, calls)
				}
			}
		})
	}
}

// TestContainerUnusable: without a Docker daemon or a singularity command,
// the run stops before any rule, saying why; flags that need another are
// usage errors.
func TestContainerUnusable(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.mf": "out:\n\techo ran > out\n"})
	fakeContainers(t, true)
	if r := mf(t, dir, "--docker", "alpine", "wf.mf"); r.code != 1 || !strings.Contains(r.err, "--docker: Docker cannot run containers on this machine (docker info: Cannot connect to the Docker daemon") {
		t.Errorf("docker down: %v", r)
	}
	t.Setenv("PATH", t.TempDir()) // no singularity, nor anything else
	if r := mf(t, dir, "--singularity", "img.sif", "wf.mf"); r.code != 1 || !strings.Contains(r.err, "--singularity: singularity is not installed on this machine") {
		t.Errorf("no singularity: %v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a rule ran")
	}
	for _, args := range [][]string{{"--docker", "a", "--singularity", "b"}, {"--docker-tar", "x.tar"}, {"--singularity-opt", "-B /x"}} {
		if r := mf(t, dir, append(args, "wf.mf")...); r.code != 2 {
			t.Errorf("%v: %v, want a usage error", args, r)
		}
	}
}

// TestSandbox: with --sandbox a rule's command sees only the files its
// rule names, and its outputs come back.
func TestSandbox(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.mf": "listing: a\n\tls > listing\n", "a": "", "b": "", "c": ""})
	if r := mf(t, dir, "--sandbox", "wf.mf"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	if got := readFile(t, filepath.Join(dir, "listing")); got != "a\nlisting\n" {
		t.Errorf("the rule saw %q, want only a and its own output", got)
	}
}
