package makeflow

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchive runs a workflow that writes its outputs into an archive,
// then runs it again from scratch in other directories, changing one thing
// at a time: a rule is taken from the archive only when its command, the
// contents of its inputs and its outputs' names are all the same.
func TestArchive(t *testing.T) {
	archive := &Archive{Dir: t.TempDir(), Read: true, Write: true}
	const wf = "mid: in\n\techo run >> runs.log; tr a-z A-Z < in > mid\nout: mid\n\techo run >> runs.log; cat mid mid > out\n"
	tests := []struct {
		name     string
		wf, in   string
		wantRuns int // rules that ran; the rest came from the archive
		wantOut  string
	}{
		{"first run fills the archive", wf, "abc\n", 2, "ABC\nABC\n"},
		{"the same inputs come from the archive", wf, "abc\n", 0, "ABC\nABC\n"},
		{"a changed input is not served from the archive", wf, "xyz\n", 2, "XYZ\nXYZ\n"},
		{"an input changed back is served again", wf, "abc\n", 0, "ABC\nABC\n"},
		{"a changed command runs", strings.Replace(wf, "cat mid mid", "cat mid mid mid", 1), "abc\n", 1, "ABC\nABC\nABC\n"},
		{"a renamed output runs", strings.ReplaceAll(wf, "out", "result"), "abc\n", 1, ""},
	}
	for _, tt := range tests {
		tr := newTestRun(t, tt.wf)
		tr.write("in", tt.in)
		if _, err := tr.run(context.Background(), Options{Archive: archive}); err != nil {
			t.Fatalf("%s: %v\n%s", tt.name, err, tr.out.String())
		}
		runs := 0
		if b, err := os.ReadFile(filepath.Join(tr.dir, "runs.log")); err == nil {
			runs = strings.Count(string(b), "run\n")
		}
		if runs != tt.wantRuns {
			t.Errorf("%s: %d rules ran, want %d\n%s", tt.name, runs, tt.wantRuns, tr.out.String())
		}
		if tt.wantOut != "" && tr.read("out") != tt.wantOut {
			t.Errorf("%s: out = %q, want %q", tt.name, tr.read("out"), tt.wantOut)
		}
		if n := strings.Count(tr.out.String(), "outputs taken from the archive"); n != 2-tt.wantRuns {
			t.Errorf("%s: said %d rules came from the archive, want %d", tt.name, n, 2-tt.wantRuns)
		}
	}
	// A write-only archive is not read; a read-only one is not written.
	tr := newTestRun(t, "solo: in\n\techo run >> runs.log; cat in > solo\n")
	tr.write("in", "q\n")
	for _, a := range []*Archive{{Dir: archive.Dir, Read: true}, {Dir: archive.Dir, Write: true}} {
		os.Remove(filepath.Join(tr.dir, "Makeflow.makeflowlog"))
		os.Remove(filepath.Join(tr.dir, "solo"))
		if _, err := tr.run(context.Background(), Options{Archive: a}); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.read("runs.log"); got != "run\nrun\n" {
		t.Errorf("read-only then write-only archive: runs %q, want two", got)
	}
}

func TestArchiveTaskID(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b"), []byte("B"), 0o666)
	os.WriteFile(filepath.Join(dir, "a"), []byte("A"), 0o666)
	r := &Rule{Sources: []File{{Name: "b"}, {Name: "a"}}, Targets: []File{{Name: "y"}, {Name: "x"}}}
	id, err := archiveTaskID(&Job{Rule: r, Command: "cat a b > x; cp x y"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	// sha1("Ccat a b > x; cp x y\0" "Ia" "C" sha1("A") "\0" "Ib" "C" sha1("B") "\0" "Ox\0" "Oy\0"), as CCTools'
	// batch_job_generate_id computes it.
	const want = "d79caeb4631261ee0a829d6528443c7dcf12bbf4"
	if id != want {
		t.Errorf("task ID %s, want %s", id, want)
	}
}
