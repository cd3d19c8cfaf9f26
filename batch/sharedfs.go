package batch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tailSize is how much of a job's standard output and error an Event keeps.
const tailSize = 4096

// sharedJob is a job checked for a driver that runs it in place on a shared
// filesystem, with its directory made absolute.
type sharedJob struct {
	Job
	dir string // absolute Job.Dir
}

// prepareShared checks job for a shared-filesystem driver — the command, the
// environment, the resources, that the directory and the inputs exist — and
// creates the directories of the outputs. It returns a copy the caller may
// keep: the driver must not see later changes to the caller's Job.
func prepareShared(job *Job) (*sharedJob, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	dir := job.Dir
	if dir == "" {
		dir = "."
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("job directory: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("job directory %s is not a directory", dir)
	}
	j := &sharedJob{Job: *job, dir: dir}
	j.Inputs = slices.Clone(job.Inputs)
	j.Outputs = slices.Clone(job.Outputs)
	j.Env = slices.Clone(job.Env)
	for _, f := range j.Inputs {
		if err := sameName(f); err != nil {
			return nil, err
		}
		if _, err := os.Stat(j.path(f)); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	for _, f := range j.Outputs {
		if err := sameName(f); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(j.path(f)), 0o777); err != nil {
			return nil, fmt.Errorf("output %s: %w", f.Path, err)
		}
	}
	return j, nil
}

// Validate checks what every driver needs of a job, shared filesystem or
// not: a command, environment entries NAME=value with NAME a shell variable
// name, no negative resource, no file with an empty path. Drivers call it
// in Submit.
func (job *Job) Validate() error {
	if strings.TrimSpace(job.Command) == "" {
		return errors.New("job has no command")
	}
	for _, kv := range job.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !isShellName(name) {
			return fmt.Errorf("environment entry %q is not NAME=value with NAME a shell variable name", kv)
		}
	}
	r := job.Resources
	if r.Cores < 0 || r.MemoryMB < 0 || r.DiskMB < 0 || r.WallTime < 0 {
		return fmt.Errorf("negative resource request %+v", r)
	}
	for _, f := range slices.Concat(job.Inputs, job.Outputs) {
		if f.Path == "" {
			return errors.New("job names a file with an empty path")
		}
	}
	return nil
}

// sameName refuses renaming, which needs a driver that ships files.
func sameName(f File) error {
	if f.Remote != "" && filepath.Clean(f.Remote) != filepath.Clean(f.Path) {
		return fmt.Errorf("file %s -> %s: renaming needs a driver that ships files: %w",
			f.Path, f.Remote, errors.ErrUnsupported)
	}
	return nil
}

func isShellName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// path is where file f is, for a job run in place.
func (j *sharedJob) path(f File) string {
	if filepath.IsAbs(f.Path) {
		return f.Path
	}
	return filepath.Join(j.dir, f.Path)
}

// missingOutput returns an error wrapping ErrMissingOutput naming the
// outputs that do not exist, or nil.
func (j *sharedJob) missingOutput() error {
	var missing []string
	for _, f := range j.Outputs {
		if _, err := os.Stat(j.path(f)); err != nil {
			missing = append(missing, f.Path)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMissingOutput, strings.Join(missing, ", "))
}

// finish turns an exit status into the final status of a command that ran
// to its end: Done, unless it exited 0 without making its outputs.
func (j *sharedJob) finish(code int) Status {
	if code == 0 {
		if err := j.missingOutput(); err != nil {
			return Status{State: Failed, Err: err}
		}
	}
	return Status{State: Done, ExitCode: code}
}

// wrapper returns the /bin/sh script a batch system runs for the job. It
// runs the command in its own shell, so that an exit or exec in the command
// cannot skip the rest, and then records the command's exit status in
// statusPath, written under another name and renamed so that the driver
// never reads half a number.
func (j *sharedJob) wrapper(statusPath string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# rightsize batch job %s\n", jobName(j.Name))
	fmt.Fprintf(&b, "cd %s || exit 1\n", shellQuote(j.dir))
	for _, kv := range j.Env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "%s=%s; export %s\n", name, shellQuote(value), name)
	}
	fmt.Fprintf(&b, "/bin/sh -c %s </dev/null\n", shellQuote(j.Command))
	b.WriteString("status=$?\n")
	tmp := statusPath + ".tmp"
	fmt.Fprintf(&b, "echo \"$status\" >%s && mv -f %s %s\n", shellQuote(tmp), shellQuote(tmp), shellQuote(statusPath))
	b.WriteString("exit \"$status\"\n")
	return b.String()
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// jobName is name as every batch system accepts it: letters, digits, '_',
// '-' and '.', not starting with a digit, at most 64 characters.
func jobName(name string) string {
	if name == "" {
		return "rightsize"
	}
	b := []byte(name)
	for i, c := range b {
		if !(c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '_'
		}
	}
	if b[0] >= '0' && b[0] <= '9' {
		b = append([]byte("j"), b...)
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// readTail returns the last tailSize bytes of the file at path; nothing if
// it cannot be read.
func readTail(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > tailSize {
		if _, err := f.Seek(-tailSize, io.SeekEnd); err != nil {
			return nil
		}
	}
	b, _ := io.ReadAll(io.LimitReader(f, tailSize))
	return b
}
