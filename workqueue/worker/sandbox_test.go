package worker

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/workqueue/wire"
)

// taskMsg is a task description as a master sends it; files are infile,
// outfile or dir lines.
func taskMsg(id int, cmd string, files ...string) string {
	return fmt.Sprintf("task %d\ncmd %d\n%s", id, len(cmd), cmd) + strings.Join(files, "") + "end\n"
}

type taskResult struct {
	wire.Result
	output string
}

// results collects n results, asking for them as a master does.
func results(t *testing.T, f *fakeMaster, n int) map[int]taskResult {
	t.Helper()
	got := map[int]taskResult{}
	inReply := false
	for len(got) < n || inReply {
		m, err := f.c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d results: %v", len(got), n, err)
		}
		switch m := m.(type) {
		case wire.AvailableResults:
			f.send(t, "send_results -1\n")
			inReply = true
		case wire.Result:
			out, err := f.c.ReadBody(m.Size)
			if err != nil {
				t.Fatal(err)
			}
			got[m.TaskID] = taskResult{m, string(out)}
		case wire.End:
			inReply = false
		case wire.Info:
		default:
			t.Fatalf("unexpected %#v", m)
		}
	}
	return got
}

// waitFile waits for a file a task makes.
func waitFile(t *testing.T, name string) {
	t.Helper()
	testutil.WaitFor(t, name+" to appear", 20*time.Second, func() bool {
		_, err := os.Lstat(name)
		return err == nil
	})
}

// TestSandboxNotReused: a process that escapes its task's process group
// (setsid) and writes to its task's directory after the task ended (a file,
// and a symbolic link to a directory outside) reaches no later task: each
// task has a fresh sandbox, and the worker places inputs without following
// links.
func TestSandboxNotReused(t *testing.T) {
	marks, outside := t.TempDir(), t.TempDir()
	t.Cleanup(func() { os.WriteFile(filepath.Join(marks, "go"), nil, 0o644) }) // let the escapee end
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	escapee := fmt.Sprintf("setsid sh -c 'touch %[1]s/up; until [ -e %[1]s/go ]; do sleep 0.01; done; echo planted > planted; ln -s %[2]s sub; touch %[1]s/done' </dev/null >/dev/null 2>&1 & "+
		"until [ -e %[1]s/up ]; do sleep 0.01; done", marks, outside)
	f.send(t, taskMsg(1, escapee))
	if r := results(t, f, 1); r[1].Status != 0 || r[1].Exit != 0 {
		t.Fatalf("task 1: %+v", r[1])
	}
	os.WriteFile(filepath.Join(marks, "go"), nil, 0o644)
	waitFile(t, filepath.Join(marks, "done"))
	f.send(t, "put file-0-x-in 3 0644\nin\n")
	f.send(t, taskMsg(2, "ls -A; cat sub/in", "infile file-0-x-in sub/in 1\n"))
	r := results(t, f, 1)
	if r[2].Status != 0 || r[2].Exit != 0 || r[2].output != "sub\nin\n" {
		t.Errorf("task 2 saw %q (status %d, exit %d), want only its input", r[2].output, r[2].Status, r[2].Exit)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("input placed through a planted symbolic link, outside the workspace: %v", entries)
	}
}

// TestTaskProcessGroupKilled: what a task leaves running in its process
// group dies when its command exits.
func TestTaskProcessGroupKilled(t *testing.T) {
	marks := t.TempDir()
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	f.send(t, taskMsg(1, fmt.Sprintf("(trap '' HUP TERM; while :; do sleep 0.01; done) </dev/null >/dev/null 2>&1 & echo $! > %s/pid", marks)))
	if r := results(t, f, 1); r[1].Status != 0 || r[1].Exit != 0 {
		t.Fatalf("task: %+v", r[1])
	}
	b, _ := os.ReadFile(filepath.Join(marks, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid %q: %v", b, err)
	}
	t.Cleanup(func() {
		if t.Failed() { // it may have outlived the task
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	testutil.WaitFor(t, "the task's background process to die with it", 20*time.Second, func() bool {
		s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(s), ") Z ") // gone, or dead and not yet reaped
	})
}

// TestCachedInputWrittenByTask: a task that appends to its cached input
// changes no later task's input. The worker gives the task back (forsaken,
// without output, as CCTools' master expects), and from then on gives each
// task its own copy of that input.
func TestCachedInputWrittenByTask(t *testing.T) {
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	in := "infile file-0-x-in in 1\n"
	f.send(t, "put file-0-x-in 9 0644\noriginal\n"+taskMsg(1, "echo evil >> in; cat in", in))
	if r := results(t, f, 1); r[1].Status != resultForsaken || r[1].Size != 0 {
		t.Errorf("task 1 wrote to its cached input: %+v, want forsaken without output", r[1])
	}
	// As a master does: run it again (the worker still has the input).
	f.send(t, taskMsg(2, "echo evil >> in; cat in", in))
	if r := results(t, f, 1); r[2].Status != 0 || r[2].output != "original\nevil\n" {
		t.Errorf("task run again: %+v", r[2])
	}
	f.send(t, taskMsg(3, "cat in", in))
	if r := results(t, f, 1); r[3].Status != 0 || r[3].output != "original\n" {
		t.Errorf("a later task read %q, want the input as sent", r[3].output)
	}
}

// TestCachedInputWrittenWhileShared: a task writes to a cached input while
// another task reads it; both are given back, since the reader may have
// read either content.
func TestCachedInputWrittenWhileShared(t *testing.T) {
	marks := t.TempDir()
	f := newFakeMaster(t)
	runWorkerCores(t, f, t.TempDir(), 2)
	in := "infile file-0-x-in in 1\n"
	f.send(t, "put file-0-x-in 9 0644\noriginal\n"+
		taskMsg(1, fmt.Sprintf("touch %[1]s/reading; until [ -e %[1]s/written ]; do sleep 0.01; done; cat in", marks), in)+
		taskMsg(2, fmt.Sprintf("until [ -e %[1]s/reading ]; do sleep 0.01; done; echo evil >> in; touch %[1]s/written", marks), in))
	r := results(t, f, 2)
	for id := 1; id <= 2; id++ {
		if r[id].Status != resultForsaken {
			t.Errorf("task %d: %+v %q, want forsaken", id, r[id], r[id].output)
		}
	}
}

// TestOutputsNotFollowed: outputs are sent as regular files and
// directories only. A symbolic link (an output, an entry of one, or on the
// way to one) is answered "missing NAME ELOOP", a FIFO "missing NAME
// EINVAL": nothing is read outside the sandbox, no loop is walked, no read
// blocks.
func TestOutputsNotFollowed(t *testing.T) {
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	// "etc" links to a directory of the test's own, standing for /etc:
	// were the link followed (it was, before), its "passwd" would be moved
	// into the worker's cache, and a regression must not cost this machine
	// its real /etc/passwd.
	etc := t.TempDir()
	passwd := filepath.Join(etc, "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := "ln -s /etc/hostname host; mkdir d && echo x > d/f && ln -s . d/a && ln -s . d/b; mkfifo p; ln -s " + etc + " etc"
	f.send(t, taskMsg(1, cmd, "outfile o-host host 0\n", "outfile o-d d 0\n", "outfile o-p p 0\n", "outfile o-passwd etc/passwd 0\n"))
	if r := results(t, f, 1); r[1].Status != 0 || r[1].Exit != 0 {
		t.Fatalf("task: %+v %q", r[1], r[1].output)
	}
	eloop, einval := int(syscall.ELOOP), int(syscall.EINVAL)
	cases := []struct {
		name string
		want []string
	}{
		{"o-host", []string{fmt.Sprintf("missing o-host %d", eloop)}},
		{"o-d", []string{"dir o-d 0", fmt.Sprintf("missing o-d/a %d", eloop), fmt.Sprintf("missing o-d/b %d", eloop), "file o-d/f 2"}},
		{"o-p", []string{fmt.Sprintf("missing o-p %d", einval)}},
		{"o-passwd", []string{fmt.Sprintf("missing o-passwd %d", eloop)}},
	}
	for _, tc := range cases {
		f.send(t, "get "+tc.name+" 1\n")
		var got []string
		for len(got) <= len(tc.want) {
			m, err := f.c.ReadMessage()
			if err != nil {
				t.Fatalf("get %s: %v after %q", tc.name, err, got)
			}
			if _, ok := m.(wire.End); ok {
				break
			}
			got = append(got, strings.TrimSpace(string(m.AppendTo(nil))))
			if file, ok := m.(wire.File); ok {
				f.c.ReadBody(file.Size)
			}
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("get %s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := os.Stat(passwd); err != nil {
		t.Errorf("the file behind the link: %v", err)
	}
}

// TestCacheNotThroughPlantedLink: a symbolic link planted where the cache
// goes (by a process a task of an earlier session left running) is not
// followed: the session cannot start, rather than store files outside.
func TestCacheNotThroughPlantedLink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.Symlink(outside, filepath.Join(ws, "cache"))
	dir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if c, err := newCache(dir, &trash{dir: dir, log: slog.New(slog.DiscardHandler)}, slog.New(slog.DiscardHandler)); err == nil {
		c.close()
		t.Error("cache opened through a symbolic link")
	}
}

// listAll lists dir, which the worker keeps unlistable (mode 0311).
func listAll(t *testing.T, dir string) []string {
	t.Helper()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, boxesMode)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, e := range entries {
		list = append(list, e.Name())
	}
	return list
}

// TestSandboxDisposal: a finished sandbox, empty or holding what its task
// left (however unreadable), goes to the trash in one rename, and a sweep
// removes it; no finished sandbox stays among the tasks' own. The trash
// empties itself once it holds too many sandboxes that were not empty.
func TestSandboxDisposal(t *testing.T) {
	leaveFile := func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, "left"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		leave     func(t *testing.T, dir string)
		tasks     int
		inTrash   int // before a sweep
		wantSwept bool
	}{
		{"empty", func(*testing.T, string) {}, 1, 1, false},
		{"a file left", leaveFile, 1, 1, false},
		{"an unreadable tree left", func(t *testing.T, dir string) {
			sub := filepath.Join(dir, "a", "b")
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(sub, "left"), []byte("x"), 0o644)
			os.Chmod(filepath.Join(dir, "a"), 0)
		}, 1, 1, false},
		{"many empty", func(*testing.T, string) {}, trashFull + 1, trashFull + 1, false},
		{"many left files", leaveFile, trashFull + 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, s := openTestWorkspace(t)
			var last *os.File
			for range tc.tasks {
				sb, err := s.boxes.take()
				if err != nil {
					t.Fatal(err)
				}
				tc.leave(t, sb.Name())
				s.boxes.done(sb)
				last = sb
			}
			trash := filepath.Join(ws, "trash")
			if got := listAll(t, trash); len(got) != tc.inTrash {
				t.Errorf("trash holds %d entries, want %d", len(got), tc.inTrash)
			}
			// One made ahead, empty; the finished ones gone.
			tasks := listAll(t, filepath.Join(ws, "tasks"))
			if len(tasks) != 1 || tasks[0] == filepath.Base(last.Name()) {
				t.Errorf("tasks holds %v, want one new sandbox", tasks)
			} else if left := listAll(t, filepath.Join(ws, "tasks", tasks[0])); len(left) != 0 {
				t.Errorf("the sandbox made ahead holds %v", left)
			}
			s.trash.sweep()
			if got := listAll(t, trash); len(got) != 0 {
				t.Errorf("trash holds %v after a sweep", got)
			}
		})
	}
}

// openTestWorkspace opens a one-core session's workspace in a new
// directory, closed at the test's end, and returns the directory.
func openTestWorkspace(t *testing.T) (string, *session) {
	t.Helper()
	ws := t.TempDir()
	wsDir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wsDir.Close() })
	s := &session{w: &worker{workspace: wsDir, res: resources{cores: 1}}, log: slog.New(slog.DiscardHandler)}
	if err := s.openWorkspace(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.boxes.close()
		s.files.close()
	})
	return ws, s
}

// TestCacheEntryToTrash: an entry the master unlinks leaves the cache at
// once, through the trash.
func TestCacheEntryToTrash(t *testing.T) {
	ws, s := openTestWorkspace(t)
	for _, name := range []string{"file-1-out", "dir-2-out"} {
		p := filepath.Join(ws, "cache", name)
		if strings.HasPrefix(name, "dir") {
			os.MkdirAll(filepath.Join(p, "sub"), 0o755)
		} else {
			os.WriteFile(p, []byte("out"), 0o644)
		}
		if err := s.files.remove(name); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still in the cache (%v)", name, err)
		}
	}
	if err := s.files.remove("never-there"); err != nil {
		t.Errorf("removing an entry that is not there: %v", err)
	}
	trash := filepath.Join(ws, "trash")
	if got := listAll(t, trash); len(got) != 2 {
		t.Errorf("trash holds %v, want the two entries", got)
	}
	s.trash.sweep()
	if got := listAll(t, trash); len(got) != 0 {
		t.Errorf("trash holds %v after a sweep", got)
	}
}

// TestTrashEmptiedWhenIdle: a task that leaves files behind does not meet
// the next, and once the worker is idle its sandbox is gone from the
// trash.
func TestTrashEmptiedWhenIdle(t *testing.T) {
	workdir := t.TempDir()
	f := newFakeMaster(t)
	runWorker(t, f, workdir)
	spaces, err := filepath.Glob(filepath.Join(workdir, "worker-*"))
	if err != nil || len(spaces) != 1 {
		t.Fatalf("workspaces %v (%v), want one", spaces, err)
	}
	trash := filepath.Join(spaces[0], "trash")
	f.send(t, taskMsg(1, "ls -A; mkdir -p a/b && echo x > a/b/left && chmod 0 a && echo 1 > out", "outfile file-1-out out 0\n"))
	f.send(t, taskMsg(2, "ls -A"))
	r := results(t, f, 2)
	for id := 1; id <= 2; id++ {
		if r[id].Status != 0 || r[id].Exit != 0 || r[id].output != "" {
			t.Errorf("task %d: %+v, output %q; want an empty sandbox", id, r[id].Result, r[id].output)
		}
	}
	testutil.WaitFor(t, "the trash to be emptied", 20*time.Second, func() bool {
		return len(listAll(t, trash)) == 0
	})
}
