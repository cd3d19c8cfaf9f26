package wavefrontcmd_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBoundaryChanged is issue 10's item 9 for wavefront: after a boundary
// file changes, a re-run computes again every cell that depends on it (and
// only those), says so, and gives the answer of the new boundary; another
// function is refused and changes nothing.
func TestBoundaryChanged(t *testing.T) {
	dir := makeRdir(t, 6, 6)
	if code, _, stderr := runWF(t, "--files", "builtin:sum", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	writeCell(t, dir, 2, 0, "7\n")
	fresh := makeRdir(t, 6, 6)
	writeCell(t, fresh, 2, 0, "7\n")
	_, want, _ := runWF(t, "builtin:sum", fresh)

	code, stdout, stderr := runWF(t, "--files", "builtin:sum", dir)
	matrix := filepath.Join(dir, "R.matrix")
	for _, w := range []string{
		filepath.Join(dir, "R.2.0") + " changed since the cells of " + matrix + " were computed from it",
		"the 30 cells of " + matrix + " that depend on what changed will be computed again",
		"computed 30 cells (6 were already done)",
	} {
		if code != 0 || !strings.Contains(stderr, w) {
			t.Errorf("re-run: exit %d, stderr:\n%s\nwant %q", code, stderr, w)
		}
	}
	if stdout != want || !strings.HasPrefix(want, "R[6,6] = ") {
		t.Errorf("re-run answered %q, a fresh run %q", stdout, want)
	}
	m := load(t, matrix)
	for k, v := range load(t, filepath.Join(fresh, "R.matrix")) {
		if !bytes.Equal(m[k], v) {
			t.Errorf("R[%d,%d] = %q, want %q", k.X, k.Y, m[k], v)
		}
		if file, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("R.%d.%d", k.X, k.Y))); !bytes.Equal(file, v) {
			t.Errorf("R.%d.%d holds %q, want %q", k.X, k.Y, file, v)
		}
	}

	before, _ := os.ReadFile(matrix)
	code, _, stderr = runWF(t, "builtin:swcell", dir)
	if code != 1 || !strings.Contains(stderr, matrix+" holds cells of another function: they were computed by builtin:sum, not builtin:swcell") {
		t.Errorf("another function: exit %d\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(matrix); !bytes.Equal(after, before) {
		t.Errorf("a refused run changed %s", matrix)
	}
}

// TestDamagedCheckpoint is issue 10's item 11 for wavefront: a value
// changed in R.matrix is refused, with the command that cuts the file back
// to its intact records; after that command, the run gives the right
// answer.
func TestDamagedCheckpoint(t *testing.T) {
	dir := makeRdir(t, 9, 9)
	if code, _, stderr := runWF(t, "builtin:sum", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	matrix := filepath.Join(dir, "R.matrix")
	data, _ := os.ReadFile(matrix)
	// The value of the 31st record: lines 1 and 2 are the file header,
	// then two lines a record (values of sum have no newline).
	lines := bytes.SplitAfter(data, []byte("\n"))
	data[len(bytes.Join(lines[:2+2*30+1], nil))] ^= 1 // a digit stays a digit
	os.WriteFile(matrix, data, 0o644)

	code, _, stderr := runWF(t, "builtin:sum", dir)
	repair := regexp.MustCompile(`the 30 records before it are intact: '(truncate -s \d+ ` + regexp.QuoteMeta(matrix) + `)' keeps them`).FindStringSubmatch(stderr)
	if code != 1 || !strings.Contains(stderr, matrix+":63: corrupt record at byte ") || !strings.Contains(stderr, "checksum") || repair == nil {
		t.Fatalf("a damaged checkpoint: exit %d\n%s", code, stderr)
	}
	if out, err := exec.Command("sh", "-c", repair[1]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", repair[1], err, out)
	}
	code, stdout, stderr := runWF(t, "builtin:sum", dir)
	if code != 0 || !strings.Contains(stderr, "computed 51 cells (30 were already done)") || stdout != "R[9,9] = 1854882\n" {
		t.Errorf("after %s: exit %d\n%s%s", repair[1], code, stdout, stderr)
	}
}

// TestExportKeepsOutput is issue 10's item 12 for wavefront export: an
// export that fails, before writing or while writing, leaves the previous
// -o FILE as it was.
func TestExportKeepsOutput(t *testing.T) {
	big := makeRdir(t, 9, 9)
	if code, _, stderr := runWF(t, "builtin:sum", big); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	killed := filepath.Join(t.TempDir(), "out.tsv")
	os.WriteFile(killed, []byte("previous\n"), 0o644)
	// A file size limit of 512 bytes kills the export (SIGXFSZ) part way.
	sh := exec.Command("sh", "-c", `ulimit -f 1; exec "$0" export -o "$1" "$2"`, filepath.Join(binDir, "wavefront"), killed, big)
	if out, err := sh.CombinedOutput(); err == nil {
		t.Fatalf("the export was not stopped by the file size limit: %s", out)
	}
	if data, _ := os.ReadFile(killed); string(data) != "previous\n" {
		t.Errorf("an export killed while writing left %q in its output", data)
	}

	dir := makeRdir(t, 2, 2)
	os.WriteFile(filepath.Join(dir, "R.matrix"), []byte("1 1 1\n3\ngarbage\n"), 0o644)
	out := filepath.Join(t.TempDir(), "out.tsv")
	os.WriteFile(out, []byte("previous\n"), 0o644)
	code, _, stderr := runWF(t, "export", "-o", out, dir)
	if data, _ := os.ReadFile(out); code != 1 || string(data) != "previous\n" {
		t.Errorf("a failed export: exit %d, %s holds %q; stderr %s", code, out, data, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("a failed export left %d files beside its output", len(entries))
	}
	os.WriteFile(filepath.Join(dir, "R.matrix"), nil, 0o644)
	if code, _, stderr := runWF(t, "export", "-o", out, dir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(out); !strings.HasPrefix(string(data), "0\t0\t0\n") {
		t.Errorf("export wrote %q", data)
	}
}
