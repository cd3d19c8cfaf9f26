package worker

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCachedInputOpenedForWriting: a task that opens its cached input for
// writing and closes it without writing (as `: >> in` does, and as the
// copy's own descriptor does when a process forked while the copy was
// being made closes it at its exec) changes nothing, so it is not given
// back; nor is a later task.
func TestCachedInputOpenedForWriting(t *testing.T) {
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	in := "infile file-0-x-in in 1\n"
	f.send(t, "put file-0-x-in 9 0644\noriginal\n"+taskMsg(1, ": >> in; cat in", in))
	if r := results(t, f, 1); r[1].Status != 0 || r[1].output != "original\n" {
		t.Errorf("task 1 opened its cached input for writing only: %+v %q, want success", r[1], r[1].output)
	}
	f.send(t, taskMsg(2, "cat in", in))
	if r := results(t, f, 1); r[2].Status != 0 || r[2].output != "original\n" {
		t.Errorf("task 2: %+v %q", r[2], r[2].output)
	}
}

// TestCachedInputWrittenThroughMapping: a task that changes its cached
// input through a shared mapping (no write call, so no IN_MODIFY) is given
// back when it closes the file, and a later task reads the input as sent.
func TestCachedInputWrittenThroughMapping(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeMaster(t)
	runWorker(t, f, t.TempDir())
	in := "infile file-0-x-in in 1\n"
	cmd := "WORKER_TEST_MAP_WRITE=in " + strconv.Quote(exe) + " -test.run='^TestMapWriterChild$' && cat in"
	f.send(t, "put file-0-x-in 9 0644\noriginal\n"+taskMsg(1, cmd, in))
	if r := results(t, f, 1); r[1].Status != resultForsaken {
		t.Errorf("task 1 changed its cached input through a mapping: %+v %q, want forsaken", r[1], r[1].output)
	}
	f.send(t, taskMsg(2, "cat in", in))
	if r := results(t, f, 1); r[2].Status != 0 || r[2].output != "original\n" {
		t.Errorf("a later task read %q, want the input as sent", r[2].output)
	}
}

// TestMapWriterChild is TestCachedInputWrittenThroughMapping's task: it
// upper-cases the first byte of the file $WORKER_TEST_MAP_WRITE through a
// shared mapping. It does nothing in a normal run.
func TestMapWriterChild(t *testing.T) {
	name := os.Getenv("WORKER_TEST_MAP_WRITE")
	if name == "" {
		t.Skip("run by TestCachedInputWrittenThroughMapping")
	}
	fd, err := unix.Open(name, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, 1, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	b[0] -= 'a' - 'A'
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(fd); err != nil {
		t.Fatal(err)
	}
}
