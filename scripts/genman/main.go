// Command genman writes the manual pages of the tools — allpairs(1),
// wavefront(1), makeflow(1), makeflow_analyze(1), workqueue(1) and one for
// each workqueue subcommand — from their cobra commands, so that the pages say what
// --help says. `make man` runs it.
//
// Usage: go run ./scripts/genman [-dir man]
package main

import (
	"flag"
	"io"
	"log"
	"os"
	"strings"

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
	if err := generate(*dir); err != nil {
		log.Fatal(err)
	}
}

// generate writes the pages into dir.
func generate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s := cmdutil.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}
	for _, cmd := range []*cobra.Command{allpairscmd.Command(s), wavefrontcmd.Command(s), makeflowcmd.Command(s), makeflowcmd.AnalyzeCommand(s), workqueuecmd.Command(s)} {
		cmdutil.Prepare(cmd)
		cmd.DisableAutoGenTag = true // the pages do not change with the day they were made
		header := &doc.GenManHeader{Title: strings.ToUpper(cmd.Name()), Section: "1", Source: cmdutil.Version(), Manual: "rightsize manual"}
		if err := doc.GenManTree(cmd, header, dir); err != nil {
			return err
		}
	}
	return nil
}
