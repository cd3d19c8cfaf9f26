package makeflow

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// An Archive keeps the outputs of rules that succeeded, so that a later
// run of the same command on the same inputs, in any workflow, takes them
// from it instead of running (CCTools' makeflow --archive). A rule is
// found by its task ID: a SHA-1 over its command, the names and contents of
// its inputs and the names of its outputs, as CCTools computes it, so a
// changed input, command or output list never reuses an old result. The
// layout is CCTools':
//
//	Dir/files/XX/<content SHA-1>                 the files, stored once
//	Dir/tasks/XX/<task ID>/output_files/<name>   links to them
//	Dir/tasks/XX/<task ID>/task_info, run_info   what ran, as JSON
//
// so that either implementation reads what the other wrote (for inputs
// that are files; a directory input is hashed with its files' paths, which
// CCTools leaves out).
type Archive struct {
	Dir         string
	Read, Write bool
}

// DefaultArchiveDir is CCTools' archive directory for the user uid.
func DefaultArchiveDir(uid int) string { return fmt.Sprintf("/tmp/makeflow.archive.%d", uid) }

// archiveTaskID is CCTools' batch_job_generate_id for job, whose files are
// relative to dir: "C" command NUL, then per input sorted by name "I" name
// "C" content-SHA-1 NUL, then per output sorted by name "O" name NUL.
func archiveTaskID(job *Job, dir string) (string, error) {
	h := sha1.New()
	io.WriteString(h, "C"+job.Command+"\x00")
	r := job.Rule
	inputs := fileNames(r.Sources)
	for _, name := range inputs {
		sum, err := contentID(inDir(dir, name))
		if err != nil {
			return "", err
		}
		io.WriteString(h, "I"+name+"C"+sum+"\x00")
	}
	for _, name := range fileNames(r.Targets) {
		io.WriteString(h, "O"+name+"\x00")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileNames(files []File) []string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// contentID is the SHA-1 of a file's content, or for a directory of the
// relative path and content ID of everything in it.
func contentID(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	h := sha1.New()
	if !info.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == path || d.IsDir() {
			return err
		}
		sum, err := contentID(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		io.WriteString(h, rel+":"+sum+"\n")
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

func (a *Archive) taskDir(id string) string { return filepath.Join(a.Dir, "tasks", id[:2], id) }
func (a *Archive) fileDir(id string) string { return filepath.Join(a.Dir, "files", id[:2]) }

// archivable reports whether a rule's outputs can be kept: CCTools names
// them in the archive by their base names, which must then differ.
func archivable(r *Rule) bool {
	if r.Nested != nil || len(r.Targets) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, f := range r.Targets {
		b := filepath.Base(f.Name)
		if seen[b] {
			return false
		}
		seen[b] = true
	}
	return true
}

// restore puts the outputs of task id into place, if the archive holds
// every one of them, and reports whether it did.
func (a *Archive) restore(r *Rule, id, dir string) (bool, error) {
	task := a.taskDir(id)
	for _, f := range r.Targets {
		if _, err := os.Stat(filepath.Join(task, "output_files", filepath.Base(f.Name))); err != nil {
			return false, nil
		}
	}
	for _, f := range r.Targets {
		dst := inDir(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			return false, err
		}
		if err := copyTree(filepath.Join(task, "output_files", filepath.Base(f.Name)), dst); err != nil {
			return false, fmt.Errorf("restore %s from the archive: %w", f.Name, err)
		}
	}
	return true, nil
}

// store keeps the outputs of a rule that succeeded as task id.
func (a *Archive) store(job *Job, id, dir string, res *Result) error {
	r := job.Rule
	task := a.taskDir(id)
	if _, err := os.Stat(task); err == nil {
		return nil // kept already, by an earlier run
	}
	// Build the task under a temporary name and rename it into place, so
	// that a reader never finds half a task.
	if err := os.MkdirAll(filepath.Dir(task), 0o777); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(task), ".tmp-"+id+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	info := map[string]any{"COMMAND": job.Command}
	for _, group := range []struct {
		key, sub string
		files    []File
	}{{"INPUT_FILES", "input_files", r.Sources}, {"OUTPUT_FILES", "output_files", r.Targets}} {
		ids := map[string]string{}
		if err := os.MkdirAll(filepath.Join(tmp, group.sub), 0o777); err != nil {
			return err
		}
		for _, f := range group.files {
			src := inDir(dir, f.Name)
			fid, err := contentID(src)
			if err != nil {
				return err
			}
			ids[f.Name] = fid
			if err := a.storeFile(src, fid); err != nil {
				return err
			}
			link := filepath.Join(tmp, group.sub, filepath.Base(f.Name))
			if err := os.Symlink(filepath.Join("../../../../files", fid[:2], fid), link); err != nil && !os.IsExist(err) {
				return err
			}
		}
		info[group.key] = ids
	}
	run := map[string]any{"SUBMITTED": res.Started.Unix(), "STARTED": res.Started.Unix(), "FINISHED": res.Ended.Unix(),
		"EXIT_NORMAL": 1, "EXIT_CODE": res.ExitCode, "EXIT_SIGNAL": 0}
	for name, v := range map[string]any{"task_info": info, "run_info": run} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(tmp, name), append(b, '\n'), 0o666); err != nil {
			return err
		}
	}
	// Another run may have kept the same task meanwhile: either is good.
	if err := os.Rename(tmp, task); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	return nil
}

// storeFile copies a file or directory into files/, once.
func (a *Archive) storeFile(src, fid string) error {
	dst := filepath.Join(a.fileDir(fid), fid)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(a.fileDir(fid), 0o777); err != nil {
		return err
	}
	tmp := dst + ".tmp-" + fmt.Sprint(time.Now().UnixNano())
	if err := copyTree(src, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Lstat(dst); serr != nil {
			return err
		}
	}
	return nil
}

// copyTree copies a file, or a directory and everything in it, from src
// to dst, following links.
func copyTree(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return copyFile(src, dst, info.Mode().Perm())
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return os.MkdirAll(to, 0o777)
		}
		return copyFile(p, to, st.Mode().Perm())
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fromArchive takes a job's outputs from the archive, if Options.Archive
// reads it and holds them, and reports whether it did; the job then counts
// as having run. It remembers the job's task ID for toArchive.
func (d *driver) fromArchive(job *Job) bool {
	a := d.opts.Archive
	if a == nil || d.opts.DryRun || !archivable(job.Rule) {
		return false
	}
	id, err := archiveTaskID(job, d.dir)
	if err != nil {
		d.logger.Debug("archive: no task ID", "rule", job.Rule.ID, "err", err)
		return false
	}
	d.archiveIDs[job.Rule.ID] = id
	if !a.Read {
		return false
	}
	ok, err := a.restore(job.Rule, id, d.dir)
	if err != nil {
		fmt.Fprintf(d.out, "warning: --archive: %v\n", err)
	}
	if !ok {
		return false
	}
	fmt.Fprintf(d.out, "rule %d (%s): outputs taken from the archive (task %s)\n", job.Rule.ID, job.Rule.Pos, id)
	now := time.Now()
	d.running++
	d.finish(&Result{Job: job, Started: now, Ended: now, archived: true})
	return true
}

// toArchive keeps the outputs of a job that succeeded, if Options.Archive
// writes to it.
func (d *driver) toArchive(res *Result) {
	a := d.opts.Archive
	id, ok := d.archiveIDs[res.Job.Rule.ID]
	if a == nil || !a.Write || res.archived || !ok {
		return
	}
	delete(d.archiveIDs, res.Job.Rule.ID)
	if err := a.store(res.Job, id, d.dir, res); err != nil {
		fmt.Fprintf(d.out, "warning: --archive: rule %d (%s): %v\n", res.Job.Rule.ID, res.Job.Rule.Pos, err)
	}
}
