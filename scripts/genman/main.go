// Command genman writes the manual pages of the tools — allpairs(1),
// wavefront(1), makeflow(1), makeflow_analyze(1), workqueue(1) and one for
// each workqueue subcommand — from their cobra commands, so that the pages say what
// --help says. `make man` runs it.
//
// A page is dated, as Debian's reproducible-builds guidance asks, by
// $SOURCE_DATE_EPOCH when it is set, and otherwise by the last commit
// that changed a Go file its command is built from, so that pages made
// again with nothing changed are the same byte for byte, whatever the
// month. Outside a git checkout, with no $SOURCE_DATE_EPOCH, a page has
// no date.
//
// Usage: go run ./scripts/genman [-dir man]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/rightsize/rightsize/internal/allpairscmd"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/makeflowcmd"
	"github.com/rightsize/rightsize/internal/wavefrontcmd"
	"github.com/rightsize/rightsize/internal/workqueuecmd"
)

func main() {
	dir := flag.String("dir", "man", "where to write the pages")
	flag.Parse()
	if err := generate(*dir, pageDate); err != nil {
		log.Fatal(err)
	}
}

// A tool is a command with pages, and the package it is built from.
type tool struct {
	command func(cmdutil.Streams) *cobra.Command
	pkg     string
}

func tools() []tool {
	return []tool{
		{allpairscmd.Command, "github.com/rightsize/rightsize/internal/allpairscmd"},
		{wavefrontcmd.Command, "github.com/rightsize/rightsize/internal/wavefrontcmd"},
		{makeflowcmd.Command, "github.com/rightsize/rightsize/internal/makeflowcmd"},
		{makeflowcmd.AnalyzeCommand, "github.com/rightsize/rightsize/internal/makeflowcmd"},
		{workqueuecmd.Command, "github.com/rightsize/rightsize/internal/workqueuecmd"},
	}
}

// generate writes the pages into dir, each dated by date(pkg), pkg the
// package its command is built from; nil for no date.
func generate(dir string, date func(pkg string) (*time.Time, error)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s := cmdutil.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}
	for _, t := range tools() {
		cmd := t.command(s)
		cmdutil.Prepare(cmd)
		cmd.DisableAutoGenTag = true // no "Auto generated" line with the day it was made
		when, err := date(t.pkg)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.Name(), err)
		}
		// Cobra dates a page by the clock when it has no date: it is
		// given one, and its text then removed.
		header := &doc.GenManHeader{Title: strings.ToUpper(cmd.Name()), Section: "1", Source: cmdutil.Version(), Manual: "rightsize manual", Date: when}
		if when == nil {
			header.Date = &time.Time{}
		}
		if err := doc.GenManTree(cmd, header, dir); err != nil {
			return err
		}
		if when == nil {
			if err := undate(dir, cmd); err != nil {
				return err
			}
		}
	}
	return nil
}

// thDate is the date field of a page's .TH line.
var thDate = regexp.MustCompile(`(?m)^(\.TH "[^"]*" "[^"]*" )"[^"]*"`)

// undate removes the date from the pages of cmd and its subcommands, as
// GenManTree names them.
func undate(dir string, cmd *cobra.Command) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := undate(dir, c); err != nil {
			return err
		}
	}
	page := filepath.Join(dir, strings.ReplaceAll(cmd.CommandPath(), " ", "-")+".1")
	b, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	return os.WriteFile(page, thDate.ReplaceAll(b, []byte(`$1""`)), 0o644)
}

// pageDate is the date of the pages of the command built from package
// pkg: $SOURCE_DATE_EPOCH if set, else the date of the last commit that
// changed one of the Go files of pkg and of the packages of this module
// it imports; nil when there is no git history to ask.
func pageDate(pkg string) (*time.Time, error) {
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", epoch)
		}
		t := time.Unix(sec, 0).UTC()
		return &t, nil
	}
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w%s", pkg, err, stderrOf(err))
	}
	files := strings.Fields(string(out))
	git := exec.Command("git", append([]string{"log", "-1", "--format=%ct", "--"}, files...)...)
	if len(files) > 0 {
		git.Dir = filepath.Dir(files[0])
	}
	out, err = git.Output()
	if err != nil {
		// Not a git checkout (a source archive), or no git: no date.
		return nil, nil
	}
	sec, err := strconv.ParseInt(string(bytes.TrimSpace(out)), 10, 64)
	if err != nil {
		return nil, nil // files never committed
	}
	t := time.Unix(sec, 0).UTC()
	return &t, nil
}

// stderrOf returns the standard error of a failed command, to add to its
// error.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(exit.Stderr))
	}
	return ""
}
