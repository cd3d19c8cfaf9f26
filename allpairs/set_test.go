package allpairs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/allpairs"
)

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadSetDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "b.dat"), "bb")
	write(t, filepath.Join(dir, "a.dat"), "a")
	write(t, filepath.Join(dir, ".hidden"), "x")
	write(t, filepath.Join(dir, "sub", "c.dat"), "c")
	os.Symlink(filepath.Join(dir, "a.dat"), filepath.Join(dir, "link.dat"))
	s, err := allpairs.ReadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range s.Items {
		names = append(names, it.Name)
	}
	if got := strings.Join(names, ","); got != "a.dat,b.dat,link.dat" {
		t.Errorf("items = %s, want a.dat,b.dat,link.dat", got)
	}
	if s.Items[1].Size != 2 || s.Bytes() != 4 || s.Items[0].Path != filepath.Join(dir, "a.dat") {
		t.Errorf("items = %+v", s.Items)
	}
}

func TestReadSetList(t *testing.T) {
	dir := t.TempDir()
	a := write(t, filepath.Join(dir, "x", "a"), "a")
	b := write(t, filepath.Join(dir, "y", "b"), "b")
	list := write(t, filepath.Join(dir, "set.list"), a+"\n\n"+b+"\r\n")
	s, err := allpairs.ReadSet(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Items) != 2 || s.Items[0].Name != a || s.Items[1].Path != b {
		t.Errorf("items = %+v", s.Items)
	}
}

func TestReadSetErrors(t *testing.T) {
	dir := t.TempDir()
	good := write(t, filepath.Join(dir, "good"), "g")
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	write(t, filepath.Join(dir, "onlyhidden", ".x"), "")
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling"))
	withDangling := filepath.Join(dir, "dangling-dir")
	os.Mkdir(withDangling, 0o755)
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(withDangling, "bad"))

	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "set " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"empty dir", filepath.Join(dir, "empty"), "the directory has no files"},
		{"only hidden", filepath.Join(dir, "onlyhidden"), "the directory has no files"},
		{"dangling link in dir", withDangling, "bad: no such file or directory"},
		{"empty list", write(t, filepath.Join(dir, "empty.list"), "\n\n"), "no files listed"},
		{"missing item", write(t, filepath.Join(dir, "m.list"), good+"\n"+filepath.Join(dir, "gone")+"\n"), "m.list:2: " + filepath.Join(dir, "gone") + ": no such file or directory"},
		{"directory item", write(t, filepath.Join(dir, "d.list"), dir+"\n"), "d.list:1: " + dir + ": not a regular file"},
		{"binary file", write(t, filepath.Join(dir, "bin.list"), "\x00\x01\x02"), "bin.list:1: a NUL byte: this is not a set list"},
		{"long line", write(t, filepath.Join(dir, "long.list"), strings.Repeat("x", 2<<20)), "a line longer than 1 MiB"},
	}
	for _, tt := range tests {
		_, err := allpairs.ReadSet(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadSet error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}
