package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckOutputPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, path string
		want       string // "" for accepted
	}{
		{"-o", "", ""},
		{"-o", file, ""},
		{"-o", filepath.Join(dir, "new"), ""},
		{"-o", "relative-in-cwd", ""},
		{"-o", filepath.Join(dir, "missing", "out"), "-o " + filepath.Join(dir, "missing", "out") + ": directory " + filepath.Join(dir, "missing") + " does not exist"},
		{"--matrix", filepath.Join(file, "m"), "--matrix " + filepath.Join(file, "m") + ": " + file + " is not a directory"},
		{"-l", dir, "-l " + dir + ": is a directory; name a file"},
	} {
		err := CheckOutputPath(tc.flag, tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckOutputPath(%q, %q) = %v, want nil", tc.flag, tc.path, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("CheckOutputPath(%q, %q) = %v, want %q", tc.flag, tc.path, err, tc.want)
		case err != nil && ExitCode(err) != ExitUsage:
			t.Errorf("CheckOutputPath(%q, %q): exit code %d, want %d", tc.flag, tc.path, ExitCode(err), ExitUsage)
		}
	}
}
