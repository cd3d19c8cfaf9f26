// Command makeflow_analyze checks and describes a Makeflow workflow without
// running it, as CCTools' makeflow_analyze does. See makeflow_analyze
// --help.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/makeflowcmd"
)

func main() { cmdutil.RunMain(makeflowcmd.AnalyzeMain) }
