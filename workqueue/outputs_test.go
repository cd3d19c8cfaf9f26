package workqueue

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/wire"
	"github.com/rightsize/rightsize/workqueue/worker"
)

// connectAsWorker connects to m on a real socket as a one-core worker
// called name, its hello and resources sent, and returns the connection
// (nil after t.Error if it cannot), the protocol on it, and send, which
// writes raw protocol text at once. A minute bounds the whole exchange.
func connectAsWorker(t *testing.T, m *Master, name string) (net.Conn, *wire.Conn, func(string)) {
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port()))
	if err != nil {
		t.Error(err)
		return nil, nil, nil
	}
	conn.SetDeadline(time.Now().Add(time.Minute))
	c := wire.NewConn(conn, wire.Limits{})
	send := func(s string) {
		c.WriteRaw([]byte(s))
		c.Flush()
	}
	send("workqueue 9 " + name + " Linux x86_64 1\nresource cores 1 1 1\nresource memory 100 100 100\nresource disk 100 100 100\nresource tag 0\n")
	return conn, c, send
}

// fakeWorker connects to m as a worker on a real socket: it takes tasks,
// reports each at once with the result code status, and answers each get
// with reply (raw protocol text, "end" included), until reply returns
// false: then it closes the connection, as a worker that dies does. It
// returns when the connection is closed.
func fakeWorker(t *testing.T, m *Master, status ResultCode, reply func(get wire.Get) (string, bool)) {
	t.Helper()
	conn, c, send := connectAsWorker(t, m, "fake")
	if conn == nil {
		return
	}
	defer conn.Close()
	var done []int
	for {
		msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		switch msg := msg.(type) {
		case wire.Put:
			c.DiscardBody(msg.Size)
		case wire.Task:
			if _, err := c.ReadTask(msg.ID); err != nil {
				t.Errorf("fake worker: %v", err)
				return
			}
			done = append(done, msg.ID)
			send("available_results\n")
		case wire.SendResults:
			for _, id := range done {
				send(fmt.Sprintf("result %d 0 0 1000 %d\n", status, id))
			}
			done = nil
			send("end\n")
		case wire.Get:
			text, more := reply(msg)
			send(text)
			if !more {
				return
			}
		case wire.Check:
			send("alive\n")
		case wire.Release, wire.Exit:
			return
		}
	}
}

// ls lists a directory tree as "path" (directories end in "/") and
// "path=content" (files) and "path->target" (links), sorted.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	var list []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			rel += "->" + target
		case info.IsDir():
			rel += "/"
		default:
			b, _ := os.ReadFile(p)
			rel += "=" + string(b)
		}
		list = append(list, rel)
		return nil
	})
	sort.Strings(list)
	return list
}

// TestHostileWorkerOutputs: whatever a worker answers to get, the master
// writes only below the output's destination, through no symbolic link
// that was there, and no more than a bounded tree; a reply that breaks
// the limits fails the task with a message and costs the worker its
// connection.
func TestHostileWorkerOutputs(t *testing.T) {
	type check func(t *testing.T, r *Result, dir, outside string)
	cases := []struct {
		name  string
		setup func(dir, outside string) // what the destination holds before
		reply func(name string) string
		check check
	}{
		{
			name: "through a symbolic link already in the destination",
			setup: func(dir, outside string) {
				os.MkdirAll(filepath.Join(dir, "out"), 0o755)
				os.Symlink(outside, filepath.Join(dir, "out", "link"))
			},
			reply: func(n string) string {
				return "dir " + n + " 0\ndir " + n + "/link 0\nfile " + n + "/link/evil 4\nevil" + "end\n"
			},
			check: func(t *testing.T, r *Result, dir, outside string) {
				if !r.OK() {
					t.Errorf("result: %v %v", r.Status, r.Err)
				}
				if got := strings.Join(ls(t, dir), " "); got != "out/ out/link/ out/link/evil=evil" {
					t.Errorf("destination holds %s", got)
				}
			},
		},
		{
			name: "over a symbolic link that is the destination",
			setup: func(dir, outside string) {
				os.WriteFile(filepath.Join(outside, "target"), []byte("keep"), 0o644)
				os.Symlink(filepath.Join(outside, "target"), filepath.Join(dir, "out"))
			},
			reply: func(n string) string { return "file " + n + " 4\nevilend\n" },
			check: func(t *testing.T, r *Result, dir, outside string) {
				if got := strings.Join(ls(t, dir), " "); !r.OK() || got != "out=evil" {
					t.Errorf("result %v %v, destination holds %s", r.Status, r.Err, got)
				}
			},
		},
		{
			name: "a symbolic link loop followed (as CCTools' worker does)",
			reply: func(n string) string {
				var b strings.Builder
				b.WriteString("dir " + n + " 0\n")
				for p := n + "/a"; strings.Count(p, "/") <= wire.MaxDirDepth+1; p += "/a" {
					b.WriteString("dir " + p + " 0\n")
				}
				return b.String() // and it would go on for ever
			},
			check: func(t *testing.T, r *Result, dir, outside string) {
				if r.Status != OutputTransfer || r.Err == nil || !strings.Contains(r.Err.Error(), "directories deep") {
					t.Errorf("result: %v %v", r.Status, r.Err)
				}
				if got := ls(t, dir); len(got) > 0 {
					t.Errorf("left behind: %v", got)
				}
			},
		},
		{
			name: "more entries than an output may have",
			reply: func(n string) string {
				var b strings.Builder
				b.WriteString("dir " + n + " 0\n")
				for i := 0; i <= maxReplyEntries; i++ {
					fmt.Fprintf(&b, "missing %s/%d 2\n", n, i)
				}
				return b.String() + "end\n"
			},
			check: func(t *testing.T, r *Result, dir, outside string) {
				if r.Status != OutputTransfer || r.Err == nil || !strings.Contains(r.Err.Error(), "entries") {
					t.Errorf("result: %v %v", r.Status, r.Err)
				}
				if got := ls(t, dir); len(got) > 0 {
					t.Errorf("left behind: %v", got)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := startMaster(t, Config{})
			dir, outside := t.TempDir(), t.TempDir()
			if tc.setup != nil {
				tc.setup(dir, outside)
			}
			task := &Task{Command: "true"}
			task.AddOutput(filepath.Join(dir, "out"), "out", false)
			m.Submit(task)
			go fakeWorker(t, m, Success, func(g wire.Get) (string, bool) { return tc.reply(g.Name), true })
			r := waitAll(t, m, 1)[""]
			tc.check(t, r, dir, outside)
			if got := ls(t, outside); len(got) > 1 || len(got) == 1 && got[0] != "target=keep" {
				t.Errorf("written outside the destination: %v", got)
			}
		})
	}
}

// TestRetryAfterWorkerDiedMidReply: a worker dies in the middle of a
// directory answer for an output that is a file; the task runs again on a
// real worker (ours, CCTools') and its output arrives whole, with nothing
// left behind.
func TestRetryAfterWorkerDiedMidReply(t *testing.T) {
	for _, real := range []string{"ours", "CCTools"} {
		t.Run(real, func(t *testing.T) {
			m := startMaster(t, Config{})
			dir := t.TempDir()
			task := &Task{Command: "echo whole > out.txt"}
			task.AddOutput(filepath.Join(dir, "out.txt"), "out.txt", false)
			m.Submit(task)
			fakeWorker(t, m, Success, func(g wire.Get) (string, bool) {
				return "dir " + g.Name + " 0\nfile " + g.Name + "/x 100\nonly ten b", false
			})
			if real == "ours" {
				startWorker(t, m, worker.Config{})
			} else {
				startCCToolsWorker(t, m)
			}
			r := waitAll(t, m, 1)[""]
			if !r.OK() {
				t.Errorf("task run again: %v %v", r.Status, r.Err)
			}
			if got := strings.Join(ls(t, dir), " "); got != "out.txt=whole\n" {
				t.Errorf("output directory holds %s", got)
			}
		})
	}
}

// TestOutputSymlinksRefused: a task whose outputs are symbolic links (to a
// file outside the sandbox; a directory with a link loop), or hold what a
// worker does not send (a FIFO, directories nested too deep), fails with a
// message naming them; nothing is read through a link, nothing loops, and
// the destinations stay as they were.
func TestOutputSymlinksRefused(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{})
	dir := t.TempDir()
	task := &Task{Command: "ln -s /etc/hostname host; mkdir d && echo x > d/f && ln -s . d/a && ln -s . d/b; " +
		"mkfifo p; mkdir -p deep/" + strings.Repeat("x/", wire.MaxDirDepth+2)}
	for _, name := range []string{"host", "d", "p", "deep"} {
		task.AddOutput(filepath.Join(dir, name), name, false)
	}
	m.Submit(task)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := m.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != OutputMissing || r.Err == nil {
		t.Fatalf("result: %v %v", r.Status, r.Err)
	}
	for _, want := range []string{"host (a symbolic link", "d (d/a: a symbolic link", "d (d/b: a symbolic link",
		"p (not a regular file or directory)", "more than 64 directories deep"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q does not say %q", r.Err, want)
		}
	}
	if got := ls(t, dir); len(got) > 0 {
		t.Errorf("destination holds %v", got)
	}
}

// TestOutputSymlinkLoopFromCCToolsWorker: CCTools' worker follows symbolic
// links, so a link loop in an output makes it send a directory nested as
// deep as the kernel resolves links (40), then "missing" with ELOOP. The
// master fails the task with a message naming the link, leaves the
// destination as it was, and goes on with other tasks. (With two links in
// the loop, CCTools' worker itself walks 2^40 paths and never answers.)
func TestOutputSymlinkLoopFromCCToolsWorker(t *testing.T) {
	m := startMaster(t, Config{})
	startCCToolsWorker(t, m)
	dir := t.TempDir()
	task := &Task{Command: "mkdir d && echo x > d/f && ln -s . d/a", Tag: "loop"}
	task.AddOutput(filepath.Join(dir, "d"), "d", false)
	m.Submit(task)
	r := waitAll(t, m, 1)["loop"]
	if r.Status != OutputMissing || r.Err == nil || !strings.Contains(r.Err.Error(), "/a: a symbolic link") {
		t.Errorf("result: %v %v", r.Status, r.Err)
	}
	if got := ls(t, dir); len(got) > 0 {
		t.Errorf("left behind: %v", got)
	}
	if r := runOne(t, m, "echo after"); strings.TrimSpace(string(r.Output)) != "after" {
		t.Errorf("next task: %+v", r)
	}
}

// TestCachedInputWrittenByTasks: tasks that append to a cached input they
// share: every task sees the input as the master has it, on our worker and
// on CCTools' (which gives its own no protection).
func TestCachedInputWrittenByTasks(t *testing.T) {
	m := startMaster(t, Config{})
	startWorker(t, m, worker.Config{Cores: 2})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	os.WriteFile(in, []byte("original\n"), 0o644)
	for i := 0; i < 6; i++ {
		task := &Task{Command: "echo more >> in.txt; cat in.txt", Tag: fmt.Sprint(i)}
		task.AddInput(in, "", true)
		m.Submit(task)
	}
	for tag, r := range waitAll(t, m, 6) {
		if !r.OK() || string(r.Output) != "original\nmore\n" {
			t.Errorf("task %s: %v %v %q", tag, r.Status, r.Err, r.Output)
		}
	}
	if b, _ := os.ReadFile(in); string(b) != "original\n" {
		t.Errorf("the master's input changed: %q", b)
	}
}

// TestForsakenBounded: a task its worker gives back runs again, but not
// for ever.
func TestForsakenBounded(t *testing.T) {
	m := startMaster(t, Config{})
	m.Submit(&Task{Command: "true"})
	go fakeWorker(t, m, Forsaken, nil)
	if r := waitAll(t, m, 1)[""]; r.Status != Forsaken || r.Err == nil || !strings.Contains(r.Err.Error(), "given back") {
		t.Errorf("result: %v %v", r.Status, r.Err)
	}
}

// TestTasksDoNotSeeEachOther: a task does not find a task running beside
// it by listing or guessing: sandboxes have unguessable names in a
// directory that may not be listed. Root ignores that, so when the test
// runs as root the worker runs as nobody.
func TestTasksDoNotSeeEachOther(t *testing.T) {
	m := startMaster(t, Config{})
	open := func(dir string) string { // for nobody
		os.Chmod(dir, 0o777)
		os.Chmod(filepath.Dir(dir), 0o777)
		return dir
	}
	marks, work := open(t.TempDir()), open(t.TempDir())
	cmd := exec.Command(filepath.Join(binDir, "workqueue"), "worker", "--cores", "2", "--memory", "1000", "--disk", "1000",
		"-t", "60", "-s", work, "-q", "127.0.0.1", fmt.Sprint(m.Port()))
	if os.Getuid() == 0 {
		os.Chmod(binDir, 0o755)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }) // it removes its workspace
	m.Submit(&Task{Tag: "a", Command: fmt.Sprintf("echo s3cr3t > secret; touch %[1]s/a; until [ -e %[1]s/b ]; do sleep 0.01; done", marks)})
	m.Submit(&Task{Tag: "b", Command: fmt.Sprintf("until [ -e %[1]s/a ]; do sleep 0.01; done; ls -a ..; cat ../*/secret ../t.*/secret; touch %[1]s/b; true", marks)})
	r := waitAll(t, m, 2)["b"]
	if strings.Contains(string(r.Output), "s3cr3t") || strings.Contains(string(r.Output), "..\n") {
		t.Errorf("a task found another's sandbox:\n%s", r.Output)
	}
}

// TestStage: an output's staging file is made whatever an earlier attempt
// or a killed master left at its path, and in a directory not yet made;
// a path that cannot be a file's fails.
func TestStage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  func(t *testing.T, stage string)
		wantErr bool
	}{
		{"nothing there", func(*testing.T, string) {}, false},
		{"a file left", func(t *testing.T, stage string) {
			if err := os.WriteFile(stage, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a directory left", func(t *testing.T, stage string) {
			if err := os.MkdirAll(filepath.Join(stage, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"no parent yet", func(t *testing.T, stage string) {
			if err := os.Remove(filepath.Dir(stage)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a file for a parent", func(t *testing.T, stage string) {
			dir := filepath.Dir(stage)
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sub")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "out.wqpart")
			tc.before(t, path)
			var f *os.File
			err := stage(path, func() (err error) {
				f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
				return err
			})
			if tc.wantErr {
				if err == nil {
					f.Close()
					t.Fatal("staged a file below a file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if info, err := os.Lstat(path); err != nil || !info.Mode().IsRegular() || info.Size() != 0 {
				t.Errorf("staged %v (%v), want a new empty file", info, err)
			}
		})
	}
}
