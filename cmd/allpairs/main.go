package main

import (
	"github.com/rightsize/rightsize/internal/allpairscmd"
	"github.com/rightsize/rightsize/internal/cmdutil"
)

func main() { cmdutil.RunMain(allpairscmd.Main) }
