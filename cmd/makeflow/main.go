// Command makeflow runs workflows written in CCTools' Makeflow language.
// See makeflow --help.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/makeflowcmd"
)

func main() { cmdutil.RunMain(makeflowcmd.Main) }
