package makeflowcmd

import "testing"

// TestQuiet: -q leaves the commands' own output, and nothing of makeflow's
// but errors.
func TestQuiet(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"q.mf": "a:\n\techo hello; echo made > a\nb:\n\techo no >&2; exit 3\n"})
	r := mf(t, dir, "-q", "-j", "1", "q.mf")
	if r.code != 1 || r.out != "hello\n" {
		t.Errorf("want exit 1 and only the command's output: %v", r)
	}
	// The failure is an error: it is said, with the command's stderr.
	if r.err == "" {
		t.Errorf("-q hid the failure: %v", r)
	}
}
