package workqueuecmd

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/internal/cmdutil"
)

// TestBadInputMessages: a bad flag value or address is named, with what is
// wrong with it, before anything starts; what no catalog or master answers
// says what to do.
func TestBadInputMessages(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	policy := filepath.Join(dir, "policy")
	if err := os.WriteFile(policy, []byte("max_workers: 4\ndistribution: a=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPolicy := filepath.Join(dir, "bad-policy")
	if err := os.WriteFile(badPolicy, []byte("max_workers 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"worker", "--cores", "-1", "h", "1"}, cmdutil.ExitUsage, "--cores -1: must not be negative"},
		{[]string{"worker", "--memory", "-5", "h", "1"}, cmdutil.ExitUsage, "--memory -5: must not be negative"},
		{[]string{"worker", "-M", "("}, cmdutil.ExitUsage, "-M (: not a regular expression: missing closing )"},
		{[]string{"worker", "-s", missing, "h", "1"}, cmdutil.ExitUsage, "-s " + missing + ": not a directory"},
		{[]string{"worker", "-s", file, "h", "1"}, cmdutil.ExitUsage, "-s " + file + ": not a directory"},
		{[]string{"worker", "-o", filepath.Join(missing, "log"), "h", "1"}, cmdutil.ExitUsage, "-o " + filepath.Join(missing, "log") + ": directory " + missing + " does not exist"},
		{[]string{"worker", "--foreman", "-Z", filepath.Join(missing, "port"), "h", "1"}, cmdutil.ExitUsage, "-Z " + filepath.Join(missing, "port") + ": directory " + missing + " does not exist"},
		{[]string{"worker", "-i", "10", "-b", "1", "h", "1"}, cmdutil.ExitUsage, "-b/--max-backoff 1s is shorter than -i/--min-backoff 10s"},
		{[]string{"worker", "--password", missing, "h", "1"}, cmdutil.ExitUsage, "--password: " + missing + ": no such file or directory"},
		{[]string{"worker", "--password", file, "h", "1"}, cmdutil.ExitUsage, "--password: password file " + file + " is empty"},
		{[]string{"worker", "--ssl-ca", missing, "h", "1"}, cmdutil.ExitUsage, "--ssl-ca: TLS CA: " + missing + ": no such file or directory"},
		{[]string{"worker", "--ssl-ca", file, "h", "1"}, cmdutil.ExitUsage, "--ssl-ca: TLS CA " + file + ": no PEM certificate in it"},
		{[]string{"factory", "-T", "local", "--password", missing, "h", "1"}, cmdutil.ExitUsage, "--password: " + missing + ": no such file or directory"},
		{[]string{"factory", "-T", "local", "--ssl-ca", missing, "h", "1"}, cmdutil.ExitUsage, "--ssl-ca: TLS CA: " + missing + ": no such file or directory"},
		{[]string{"factory", "-T", "local", "--worker-binary", missing, "h", "1"}, cmdutil.ExitUsage, "--worker-binary " + missing + ": no such file or directory"},
		{[]string{"factory", "-T", "local", "--worker-binary", "no-such-worker-program", "h", "1"}, cmdutil.ExitUsage, "--worker-binary no-such-worker-program: executable file not found in $PATH"},
		{[]string{"pool", "-T", "local", "--policy", policy, "--worker-binary", file}, cmdutil.ExitUsage, "--worker-binary " + file + ": permission denied"},
		{[]string{"pool", "-T", "local", "--policy", missing}, cmdutil.ExitUsage, "--policy " + missing + ": no such file or directory"},
		{[]string{"pool", "-T", "local", "--policy", badPolicy}, cmdutil.ExitFailure, badPolicy + ":1: "},
		{[]string{"pool", "-T", "local", "--policy", policy, "--password", missing}, cmdutil.ExitUsage, "--password: " + missing + ": no such file or directory"},
		{[]string{"status", "-M", "a["}, cmdutil.ExitUsage, "-M a[: not a regular expression: missing closing ]"},
		{[]string{"status", "onlyhost"}, cmdutil.ExitUsage, "onlyhost: give a master as HOST PORT or HOST:PORT"},
		{[]string{"status", "127.0.0.1:x"}, cmdutil.ExitUsage, `bad port "x"`},
		{[]string{"status", "127.0.0.1:1"}, cmdutil.ExitFailure, "status of 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused"},
		{[]string{"status", "-C", "127.0.0.1:1"}, cmdutil.ExitFailure, "workqueue status: no catalog answered (start one with 'workqueue catalog', name one with -C HOST:PORT, or ask a master directly: workqueue status HOST PORT)\n  catalog 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused\n"},
	}
	for _, tt := range tests {
		code, _, stderr := run(context.Background(), tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("workqueue %q: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// TestCatalogAddrs: -C's hosts without a port are at the catalog's
// default port, as $CATALOG_HOST's are.
func TestCatalogAddrs(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"cat", []string{"cat:9097"}},
		{"cat:9100", []string{"cat:9100"}},
		{"a,b:1;[::1]", []string{"a:9097", "b:1", "[::1]:9097"}},
	} {
		if got := catalogAddrs(tc.flag); !slices.Equal(got, tc.want) {
			t.Errorf("catalogAddrs(%q) = %q, want %q", tc.flag, got, tc.want)
		}
	}
}
