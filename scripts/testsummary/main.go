// Command testsummary reads `go test -json` on standard input and prints
// what `go test` would — each package's result, and the output of every
// test that failed — followed by the tests that were skipped and why, so
// that `make test` shows what did not run (a component not installed
// here, say) instead of hiding it in a passing package. It exits 1 if a
// test, a package or a build failed.
//
// Usage: go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail
	Test       string
	Output     string
}

type skip struct{ pkg, test, reason string }

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize prints the results of the events in r to w and reports
// whether anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	output := map[[2]string][]string{} // a test's output, until it ends
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event: what go test itself printed.
			fmt.Fprintln(w, sc.Text())
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			failed = true
		case e.Test == "":
			// A package's pass, or its skip for having no tests.
		case e.Action == "output":
			output[key] = append(output[key], e.Output)
		case e.Action == "fail":
			fmt.Fprint(w, strings.Join(output[key], ""))
			delete(output, key)
			failed = true
		case e.Action == "skip":
			skips = append(skips, skip{e.Package, e.Test, reason(output[key])})
			delete(output, key)
		case e.Action == "pass":
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	if len(skips) > 0 {
		noun := "tests"
		if len(skips) == 1 {
			noun = "test"
		}
		fmt.Fprintf(w, "\nskipped: %d %s\n", len(skips), noun)
		for _, s := range skips {
			fmt.Fprintf(w, "  %s %s: %s\n", strings.TrimPrefix(s.pkg, "github.com/rightsize/rightsize/"), s.test, s.reason)
		}
	}
	return failed, nil
}

// reason picks the skip message out of a test's output: its last line
// that says something ("    file_test.go:12: needs chromium").
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "---") || strings.HasPrefix(l, "===") {
			continue
		}
		if _, msg, ok := strings.Cut(l, ": "); ok && strings.Contains(l, "_test.go:") {
			return msg
		}
		return l
	}
	return "(no reason given)"
}
