package makeflow

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

func TestDirectCommand(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"tool", "other"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(bin, "data"), []byte("x"), 0o644)
	env := []string{"HOME=/h", "PATH=/nonexistent:" + bin}
	tests := []struct {
		cmd  string
		want string // program run directly, or "" for the shell
	}{
		{"tool a b", bin + "/tool"},
		{"tool  a=b c,d e:f g%h i@j +k", bin + "/tool"},
		{"./tool a", "./tool"},
		{"/bin/cp a b", "/bin/cp"},
		{"echo hi", ""},         // builtin
		{"true", ""},            // builtin, also a program
		{"test -e x", ""},       // builtin
		{"if", ""},              // keyword
		{"X=1 tool", ""},        // assignment
		{"tool 'a b'", ""},      // quotes
		{"tool \"a\"", ""},      // quotes
		{"tool a\\ b", ""},      // escape
		{"tool $HOME", ""},      // variable
		{"tool *.txt", ""},      // glob
		{"tool a?", ""},         // glob
		{"tool [ab]", ""},       // glob
		{"tool ~", ""},          // tilde
		{"tool > out", ""},      // redirection
		{"tool a; other", ""},   // list
		{"tool a && other", ""}, // list
		{"tool | other", ""},    // pipe
		{"tool &", ""},          // background
		{"tool $(other)", ""},   // substitution
		{"tool `other`", ""},    // substitution
		{"tool #x", ""},         // comment
		{"tool\ta", ""},         // tab
		{"missing a", ""},       // not found: the shell reports it
		{"data a", ""},          // not executable
	}
	for _, tt := range tests {
		got, argv := directCommand(tt.cmd, env, "")
		if got != tt.want {
			t.Errorf("directCommand(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
		if got != "" && strings.Join(argv, " ") != strings.Join(strings.Fields(tt.cmd), " ") {
			t.Errorf("directCommand(%q) argv = %q", tt.cmd, argv)
		}
	}
	if got, _ := directCommand("tool", []string{"HOME=/h"}, ""); got != "" {
		t.Errorf("without PATH got %q", got)
	}
}

// TestDirectCommandMatchesShell runs commands through the Local executor
// (directly where it can) and through /bin/sh -c, and compares what they
// print, their environment and exit status.
func TestDirectCommandMatchesShell(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	work := filepath.Join(root, "work")
	link := filepath.Join(root, "link")
	for _, d := range []string{bin, work} {
		os.MkdirAll(d, 0o777)
	}
	os.Symlink(work, link)
	show := "#!/bin/sh\necho \"0=$0\"; for a in \"$@\"; do echo \"arg=$a\"; done; echo \"pwd=$(pwd)\"; env | sort\n"
	os.WriteFile(filepath.Join(bin, "show"), []byte(show), 0o755)
	os.WriteFile(filepath.Join(bin, "noshebang"), []byte("echo from a script without #!\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "noexec"), []byte("#!/bin/sh\necho no\n"), 0o644)
	os.WriteFile(filepath.Join(work, "here"), []byte(show), 0o755)
	cwd, _ := os.Getwd()

	tests := []struct {
		cmd, dir string
		env      []string
		direct   bool // run without the shell
	}{
		{"show a b=c d,e", work, []string{"PATH=" + bin + ":/usr/bin:/bin", "PWD=" + cwd}, true},
		{"show x", link, []string{"PATH=" + bin + ":/usr/bin:/bin", "PWD=" + link}, true},
		{"show y", link, []string{"PATH=" + bin + ":/usr/bin:/bin"}, true},
		{"./here 1 2", work, []string{"PATH=/usr/bin:/bin", "PWD=/"}, true},
		{"noshebang", work, []string{"PATH=" + bin + ":/usr/bin:/bin"}, true}, // exec fails; the shell runs it
		{"noexec", work, []string{"PATH=" + bin + ":/usr/bin:/bin"}, false},
		{"nothere at all", work, []string{"PATH=" + bin}, false},
		{"../bin/show rel", work, []string{"PATH=/bin"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			if path, _ := directCommand(tt.cmd, tt.env, tt.dir); (path != "") != tt.direct {
				t.Errorf("directCommand = %q, want direct=%v", path, tt.direct)
			}
			sh := exec.Command("/bin/sh", "-c", tt.cmd)
			sh.Args[0] = "sh" // as the executor runs it
			sh.Dir, sh.Env = tt.dir, tt.env
			var shOut bytes.Buffer
			sh.Stdout, sh.Stderr = &shOut, &shOut
			sh.Run()
			shCode := sh.ProcessState.ExitCode()

			var out testutil.SyncBuffer
			l, err := NewLocal(LocalOptions{Stdout: &out, Stderr: &out, Environ: tt.env})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			job := &Job{Rule: &Rule{}, Command: tt.cmd, Dir: tt.dir}
			if _, err := l.Submit(job); err != nil {
				t.Fatal(err)
			}
			var res *Result
			select {
			case res = <-l.Results():
			case <-time.After(10 * time.Second):
				t.Fatal("no result")
			}
			// The executor's commands have one variable more: the
			// keeper's mark (internal/proc's SpawnAttr.Slot).
			got := regexp.MustCompile(`(?m)^RIGHTSIZE_KEEPER=.*\n`).ReplaceAllString(out.String(), "")
			if res.ExitCode != shCode || got != shOut.String() {
				t.Errorf("executor: status %d, output\n%s\nshell: status %d, output\n%s", res.ExitCode, out.String(), shCode, shOut.String())
			}
		})
	}
}
