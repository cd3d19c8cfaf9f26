package allpairscmd

import (
	"strings"
	"testing"
)

// TestHelpSaysDefaultsOnce checks that --help says once what -W and -H do
// when unset, without pflag's "(default -1)" after the usage's own words.
func TestHelpSaysDefaultsOnce(t *testing.T) {
	code, out, errOut := runMain(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d: %s", code, errOut)
	}
	for _, want := range []string{
		"number of rows (default: to the end of A)\n",
		"number of columns (default: to the end of B)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
