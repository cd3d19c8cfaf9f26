package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutputFile: the previous file stays until Commit, Abort leaves it as
// it was, a symbolic link keeps pointing at the replaced file, and a file
// that is not a regular one is written directly.
func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	os.WriteFile(path, []byte("previous"), 0o644)
	read := func(p string) string {
		data, _ := os.ReadFile(p)
		return string(data)
	}

	f, err := CreateOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	if read(path) != "previous" {
		t.Errorf("the previous file changed before Commit: %q", read(path))
	}
	f.Abort()
	if entries, _ := os.ReadDir(dir); read(path) != "previous" || len(entries) != 1 {
		t.Errorf("after Abort: %q, %d files", read(path), len(entries))
	}

	f, _ = CreateOutput(path)
	f.WriteString("new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // after Commit: nothing
	if entries, _ := os.ReadDir(dir); read(path) != "new" || len(entries) != 1 {
		t.Errorf("after Commit: %q, %d files", read(path), len(entries))
	}

	link := filepath.Join(dir, "link")
	os.Symlink("out.txt", link)
	f, _ = CreateOutput(link)
	f.WriteString("through the link")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 || read(path) != "through the link" {
		t.Errorf("a link replaced: %v, %q", st.Mode(), read(path))
	}

	f, err = CreateOutput(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("discarded")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(os.DevNull); st.Mode().IsRegular() {
		t.Errorf("%s was replaced by a regular file", os.DevNull)
	}
}
